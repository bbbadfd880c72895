"""Maps the deployable top-level folders onto one import namespace, ``adaserve.*``.

The folders stay at the top of the repository because each is a deployable part (see
DESIGN.md); setuptools' package-dir mapping makes them ``adaserve.broker``,
``adaserve.planner`` and so on. Sub-packages are discovered so that adding one needs no edit here.
"""

from setuptools import find_packages, setup

ROOTS = {
    "adaserve": "adaserve",
    "adaserve.broker": "broker",
    "adaserve.producers": "producers",
    "adaserve.planner": "planner",
    "adaserve.workers": "workers",
    "adaserve.telemetry": "telemetry",
    "adaserve.models": "models",
    "adaserve.bench": "bench",
    "adaserve.workload": "workload",
    "adaserve.profiling": "profiling",
    "adaserve.loadgen": "loadgen",
}

packages: list[str] = []
package_dir: dict[str, str] = {}
for name, folder in ROOTS.items():
    package_dir[name] = folder
    packages.append(name)
    for sub in find_packages(folder):
        packages.append(f"{name}.{sub}")
        package_dir[f"{name}.{sub}"] = f"{folder}/{sub.replace('.', '/')}"

setup(packages=packages, package_dir=package_dir)
