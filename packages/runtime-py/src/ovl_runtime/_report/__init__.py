"""What a run produced (checks of each launch, times, failures) and the ``ovl.report/v1`` report written from it."""
