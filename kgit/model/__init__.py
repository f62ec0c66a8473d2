"""The record of an iteration and the loop's decisions: pure data and rules, no git, no files."""
