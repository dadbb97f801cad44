"""Writes: every change to ctxweb's data goes through a function in one of these modules, one per
subdomain (docs/ARCHITECTURE.md lists them). Services call selectors and each other, never tasks or
views; what an append sets off is the caller's next step (``tasks.followup_send``)."""
