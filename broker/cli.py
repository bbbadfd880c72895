"""``adaserve acl``: the ACL rules of a namespace's roles, added to the CLI by ``register``."""

from __future__ import annotations

import secrets

import typer

from adaserve.broker.acl import FORMATS, ROLES, Role, role
from adaserve.broker.errors import ConfigError
from adaserve.broker.settings import load_settings


def acl_lines(namespace: str, roles: list[str], *, fmt: str, user: str | None = None, password: str | None = None,
              client_prefix: str | None = None) -> tuple[list[str], dict[str, str]]:
    """The lines to print and the passwords made up for users that were given none."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}")
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        raise ConfigError(f"unknown role {unknown[0]!r}: choose among {', '.join(ROLES)}")
    chosen = list(dict.fromkeys(roles)) or list(ROLES)
    if (user or password) and len(chosen) > 1:
        raise ConfigError("--user and --password name one user: give exactly one role with them")
    made: dict[str, str] = {}
    users: list[Role] = []
    for name in chosen:
        pw = password or secrets.token_urlsafe(24)
        u = role(namespace, name, password=pw, user=user,
                 client_prefix=client_prefix if name == "producer" else None)
        if not password:
            made[u.name] = pw
        users.append(u)
    return [u.acl_file_line() if fmt == "acl-file" else u.setuser_command() for u in users], made


def acl(
    roles: list[str] | None = typer.Argument(None, help=f"Roles to print (default: all): {', '.join(ROLES)}."),
    namespace: str | None = typer.Option(None, "--namespace", "-n", help="Namespace (default: ADASERVE_NAMESPACE)."),
    user: str | None = typer.Option(None, "--user", help="User name, for one role (default: <namespace>-<role>)."),
    password: str | None = typer.Option(None, "--password", envvar="ADASERVE_ACL_PASSWORD",
                                        help="Password, for one role (default: a random one per user, on stderr)."),
    client_prefix: str | None = typer.Option(None, "--client-prefix",
                                             help="Producer: the client-id prefix whose reply streams it may read "
                                                  "(default: its user name; the SDK's ADASERVE_CLIENT_PREFIX)."),
    fmt: str = typer.Option("acl-file", "--format", help="acl-file: lines of an ACL file; commands: ACL SETUSER "
                                                         "commands for redis-cli."),
) -> None:
    """Print Redis ACL users that let each role do its work and nothing else (docs/security.md)."""
    ns = namespace or load_settings().namespace
    lines, made = acl_lines(ns, roles or [], fmt=fmt, user=user, password=password, client_prefix=client_prefix)
    for line in lines:
        typer.echo(line)
    for name, pw in made.items():
        # Only the hash is in the rules: the password is shown once, apart from them.
        typer.echo(f"password of {name}: {pw}", err=True)


def register(app: typer.Typer) -> None:
    app.command("acl")(acl)
