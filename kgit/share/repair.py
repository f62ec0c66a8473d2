"""kgit doctor --fix: apply the repairs that the doctor's checks found, under the lock."""

from __future__ import annotations

from kgit.git import notes, read, refs, write
from kgit.git.command import Repo
from kgit.model.record import parse_note
from kgit.share import doctor
from kgit.share.doctor import Problem
from kgit.loop.recovery import locked


def fix(repo: Repo) -> tuple[list[str], list[Problem]]:
    """Repair what can be repaired; what was done, and what is left."""
    done = []
    with locked(repo) as recovered:  # which finishes an interrupted step
        done += recovered
        # Notes first: a note moved back onto its rewritten commit puts its record on the branch,
        # where the best/ tag can then find it.
        for find in (_invalid_note_problems, _note_problems, doctor.unrecorded_problems,  # each found after
                     doctor.tag_problems):  # the repairs before it
            for problem in find(repo):
                if problem.repair is not None:
                    _apply(repo, problem.repair)
                    done.append(f"{problem.problem}: {problem.fix}")
    return done, doctor.find_problems(repo)


def _invalid_note_problems(repo: Repo) -> list[Problem]:
    return doctor.invalid_note_problems(repo, notes.read_notes(repo).invalid)


def _note_problems(repo: Repo) -> list[Problem]:
    return doctor.note_problems(repo, notes.read_notes(repo))


def _apply(repo: Repo, repair: tuple) -> None:
    operation, *args = repair
    if operation == "remove_note":
        write.remove_notes(repo, args)
    elif operation == "move_note":
        old, new = args
        records = notes.read_notes(repo).by_commit[old]
        write.write_notes(repo, {new: records}, f"kgit doctor: move the note of {old[:10]} to {new[:10]}")
        write.remove_notes(repo, [old])
    elif operation == "second_parent_first":
        kernel, merge = args
        first, second = read.parents(repo, merge)
        joined = write.commit_with_files(repo, merge, second, {}, read.message(repo, merge).rstrip() +
                                         "\n\n(kgit doctor: its parents put in the order of the line it took)",
                                         also_parent=first)
        write.set_ref(repo, refs.branch_ref(kernel), joined, merge)  # the same tree: the checkout stays as it is
    elif operation == "restore_note":
        commit, text = args
        records, _ = parse_note(commit, text)
        write.write_notes(repo, {commit: records}, f"kgit doctor: put back the last valid note of {commit[:10]}")
    elif operation == "set_ref":
        write.set_ref(repo, *args)
    elif operation == "set_tag":
        write.set_tag(repo, *args)
    else:
        raise ValueError(f"unknown repair {operation!r}")
