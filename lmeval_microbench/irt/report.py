"""How an IRT fit went: the report every :class:`~.fit.IRTModel` fit leaves in ``fit_report_``.

Small and wide matrices (a dozen models, thousands of items) can leave EM short of its
tolerance or push parameters to the safety box; callers check ``trusted`` and show
:meth:`FitReport.message` rather than silently using such a fit.
"""

from __future__ import annotations

from dataclasses import dataclass

PARAMETER_BOUND = 30.0
"""Every packed item parameter (slopes, intercepts, logit g, logit(1 - u)) is kept within
+-PARAMETER_BOUND: a safety net against runaway steps, far beyond anything a converged fit
needs (the Open LLM v1 fits stay below |10|); a parameter on the bound is reported."""


@dataclass(frozen=True)
class FitReport:
    """How an :class:`IRTModel` fit went; ``IRTModel.fit_report_``.

    ``trusted`` is False when EM did not meet ``tol`` or some parameter ended on the
    :data:`PARAMETER_BOUND` box; ``problems`` then says why, in words that name the matrix,
    and the same text is issued as a :class:`ConvergenceWarning`.
    """

    source: str
    shape: tuple[int, int]
    model: str
    converged: bool
    n_iter: int
    max_iter: int
    tol: float
    max_change: float
    """Largest parameter change of the last EM step from an accepted point."""
    worst_item: str | None
    """Item whose parameters moved most in that step."""
    expansion_fallback_at: int | None
    """EM step at which the parameter expansion lowered the log posterior and was switched
    off (plain EM from there on); None when it was not needed or not used (3PL/4PL)."""
    extrapolations_accepted: int
    extrapolations_rejected: int
    items_at_bound: tuple[str, ...]
    loglik: float

    @property
    def problems(self) -> tuple[str, ...]:
        found = []
        if not self.converged:
            found.append(
                f"EM stopped at max_iter={self.max_iter} after {self.n_iter} steps with a "
                f"largest parameter change of {self.max_change:.3g} > tol={self.tol:g} "
                f"(item {self.worst_item})"
            )
        if self.items_at_bound:
            shown = ", ".join(self.items_at_bound[:3])
            extra = len(self.items_at_bound) - 3
            more = f" and {extra} more" if extra > 0 else ""
            found.append(
                f"{len(self.items_at_bound)} item(s) have a parameter on the bound "
                f"+-{PARAMETER_BOUND:g} ({shown}{more})"
            )
        return tuple(found)

    @property
    def trusted(self) -> bool:
        return not self.problems

    def message(self) -> str:
        """One line: the matrix, its shape, and every problem (empty problems: a summary)."""
        head = f"{self.model} fit on {self.source} ({self.shape[0]} models x {self.shape[1]} items)"
        if self.trusted:
            return f"{head}: converged in {self.n_iter} EM steps"
        hint = ""
        if self.expansion_fallback_at is not None:
            hint = f"; parameter expansion switched off at step {self.expansion_fallback_at}"
        return (
            f"{head} cannot be trusted: {'; '.join(self.problems)}{hint}. Item parameters "
            "and abilities may be far off; more models, fewer items, a larger max_iter or a "
            "smaller prior_sd may help"
        )
