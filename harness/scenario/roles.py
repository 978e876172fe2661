"""A ``--build`` value read against a case's build roles: every command that takes one (run, nightly,
minimize) reads it here, so none imports another command for it."""

from __future__ import annotations

from harness.scenario.loader import Case
from harness.util.errors import UserError

__all__ = ["resolve_role"]


def resolve_role(case: Case, build: str, reference: bool) -> tuple[str, str | None]:
    """(build spec, role) for a --build value that is a spec or a role name."""
    roles = case.scenario.builds
    if build in roles:
        return (roles[build].sim_spec if reference else roles[build].spec), build
    if reference:
        raise UserError(f"--reference needs --build ROLE, one of: {', '.join(roles)}")
    return build, None
