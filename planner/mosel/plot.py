"""A figure like MOSEL's Fig. 5 (plus Fig. 6's accuracy spread, Fig. 8's robustness and job
completion times)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

COLORS = {"optimized": "tab:blue", "random": "tab:orange", "aggressive": "tab:green", "none": "tab:red"}


def plot_fig5(report: dict[str, Any], path: Path) -> Path:
    """Violations and throughput vs offered load per policy, accuracy per policy, robustness."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves: dict[str, list[dict[str, Any]]] = report["curves"]
    live = report.get("live")
    rows = 4 if live else 3
    fig, ax = plt.subplots(rows, 2, figsize=(11, 4 * rows))
    for policy, pts in curves.items():
        x = [p["offered_jobs_s"] for p in pts]
        kw = {"color": COLORS.get(policy), "marker": "o", "label": policy}
        ax[0, 0].plot(x, [p["slo_violation_ratio"] for p in pts], **kw)
        ax[0, 1].plot(x, [p["throughput_jobs_s"] for p in pts], **kw)
    ax[0, 0].axhline(report["target_violation"], color="grey", ls="--", lw=1)
    ax[0, 0].set(xlabel="offered load (jobs/s)", ylabel="SLO violation ratio", title="SLO violations (simulator)")
    ax[0, 1].set(xlabel="offered load (jobs/s)", ylabel="jobs/s within deadline", title="Throughput (simulator)")
    ax[0, 0].legend()

    names, data = [], []
    for policy, pts in curves.items():
        ok = [p for p in pts if p["slo_violation_ratio"] <= report["target_violation"]]
        if ok and ok[-1]["accuracy"]["p5"] is not None:
            a = ok[-1]["accuracy"]
            names.append(f"{policy}\n@{ok[-1]['offered_jobs_s']:.0f}/s")
            data.append([a["p5"], a["p25"], a["p50"], a["p75"], a["p95"]])
    for i, q in enumerate(data):
        ax[1, 0].vlines(i, q[0], q[4], color="black", lw=1)
        ax[1, 0].add_patch(plt.Rectangle((i - 0.25, q[1]), 0.5, q[3] - q[1], fill=False))
        ax[1, 0].hlines(q[2], i - 0.25, i + 0.25, color="black")
    ax[1, 0].set_xticks(range(len(names)), names)
    ax[1, 0].set_xlim(-0.6, max(len(names), 1) - 0.4)
    ax[1, 0].set(ylabel="effective accuracy (p5-p25-p50-p75-p95)",
                 title="Accuracy at each policy's highest load within target")

    twin = ax[1, 1].twinx()
    for key, label, color in (("robustness", "with feedback", "tab:blue"),
                              ("robustness_no_feedback", "profile only", "tab:gray")):
        rob = report.get(key) or []
        if not rob:
            continue
        errs = [100 * r["profile_error"] for r in rob]
        ax[1, 1].plot(errs, [r["throughput_jobs_s"] for r in rob], "o-", color=color, label=label)
        twin.plot(errs, [r["accuracy"]["mean"] for r in rob], "s:", color=color, alpha=0.6)
        ax[1, 1].set_title(f"Robustness ({rob[0]['policy']}, {rob[0]['offered_jobs_s']:.0f} jobs/s)")
    ax[1, 1].set(xlabel="latency profile error (%)", ylabel="jobs/s within deadline (solid)")
    twin.set_ylabel("mean effective accuracy (dotted)")
    if ax[1, 1].get_legend_handles_labels()[0]:  # a report without the robustness runs has none
        ax[1, 1].legend(loc="lower right")
    _jct_panel(ax[2, 0], curves, "simulator")
    if live:
        _jct_panel(ax[2, 1], live["runs"], "live")
        _live_panels(ax[3, 0], ax[3, 1], live, report["target_violation"])
    else:
        ax[2, 1].axis("off")
    src = report["profile"]["source"]
    fig.suptitle(f"MOSEL on {report['profile']['model']} ({'SYNTHETIC profile' if report['profile']['synthetic'] else src})")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _jct_panel(ax: Any, curves: dict[str, list[dict[str, Any]]], where: str) -> None:
    """Median job completion time (completed jobs) vs offered load, per policy."""
    for policy, pts in curves.items():
        pts = [p for p in pts if p["jct_ms"]["p50"] is not None]
        ax.plot([p["offered_jobs_s"] for p in pts], [p["jct_ms"]["p50"] for p in pts],
                color=COLORS.get(policy), marker="o", label=policy)
    ax.set(xlabel="offered load (jobs/s)", ylabel="job completion time p50 (ms)",
           title=f"Job completion time ({where})", yscale="log")
    ax.legend()


def _live_panels(viol: Any, thr: Any, live: dict[str, Any], target: float) -> None:
    """The live pipeline: violations and throughput vs offered load, per policy; with repeats,
    the median and the min-max range of each point."""
    spread = live.get("spread") or {}
    for policy, pts in live["runs"].items():
        x = [p["offered_jobs_s"] for p in pts]
        kw = {"color": COLORS.get(policy), "marker": "s", "label": policy, "capsize": 3}
        for axis, key in ((viol, "slo_violation_ratio"), (thr, "throughput_jobs_s")):
            cells = [spread.get(policy, {}).get(f"{r:g}", {}).get(key) or [p[key]] for r, p in zip(x, pts)]
            mid = [c[len(c) // 2] for c in cells]
            axis.errorbar(x, mid, yerr=[[m - c[0] for m, c in zip(mid, cells)],
                                        [c[-1] - m for m, c in zip(mid, cells)]], **kw)
    viol.axhline(target, color="grey", ls="--", lw=1)
    cfg = live["config"]
    deadline = cfg.get("deadline_rule") or f"{cfg['deadline_ms']:g} ms"
    what = f"live, {len(live.get('repeats') or [1])} run(s)"
    xlabel = f"offered load (jobs/s); deadline {deadline}"
    viol.set(xlabel=xlabel, ylabel="SLO violation ratio", title=f"SLO violations ({what})")
    thr.set(xlabel=xlabel, ylabel="jobs/s within deadline", title=f"Throughput ({what})")
    viol.legend()
