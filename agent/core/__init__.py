"""The kernel every part stands on: settings, refusals, events after commit, compiled statements,
pooled connections and the kinds of file the app reads."""
