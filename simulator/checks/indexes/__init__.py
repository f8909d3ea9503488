"""The run's indexes: what the judges ask of a run, each answered once from its typed history.

`disturbances` (machine sleeps, held locks, stalled polls), `names` (the chat ids and assigned
names each session label went by), `mail` (tool calls with their results, leaves, new mail) and
`hosting` (process incarnations and the sessions each hosts when). Each is small, built once per
`simulator.checks.view.RunView`, and reads only the history it was given: a view of a cut
history (`RunView.cut`) has indexes of the cut.
"""
