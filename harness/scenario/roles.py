"""A ``--build`` value read against a case's build roles: every command that takes one (run, nightly,
minimize) reads it here, so none imports another command for it."""

from __future__ import annotations

from harness.build.labels import cpu_build_of
from harness.scenario.loader import Case
from harness.util.errors import UserError

__all__ = ["resolve_role"]


def resolve_role(case: Case, build: str, reference: bool, *, cpu: bool = False) -> tuple[str, str | None]:
    """(build spec, role) for a --build value that is a spec or a role name; ``reference``: the role's reference
    server revision; ``cpu``: the role's release on the real-SGLang CPU build."""
    roles = case.scenario.builds
    if build in roles:
        if reference:
            return roles[build].sim_spec, build
        return (cpu_build_of(roles[build].spec) if cpu else roles[build].spec), build
    if reference or cpu:
        raise UserError(f"{'--reference' if reference else '--cpu'} needs --build ROLE, one of: {', '.join(roles)}")
    return build, None
