"""Discrete-event simulator driving the planner's real scheduling code with a virtual clock."""
