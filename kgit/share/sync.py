"""kgit push / kgit pull: the branches, tags, records and attempts of every kernel, to and from a remote.

What travels, and where a clone keeps what it last saw of a remote:
  refs/heads/opt/*           <-> refs/remotes/<remote>/opt/*        fast-forward only, never forced; two
                                                                   lines are joined first (kgit.share.join)
  refs/tags/best/*           <-> refs/kgit/remotes/<remote>/best/*  follows the branch's records here, sent
                                                                   only while on the branch's best
  refs/notes/kgit            <-> refs/kgit/remotes/<remote>/notes/kgit  sent: the records of commits the
                                                                   remote will have (_outgoing_notes)
  refs/kgit/attempts/*       <-> refs/kgit/remotes/<remote>/attempts/*
Records are merged, never replaced: the remote's notes are fetched beside ours and every record of
both sides is kept (notes.union), in a merge commit on refs/notes/kgit that the remote can then take
as a fast-forward. git's own `git notes merge` would stop at the first commit both sides annotated.
Attempts keep their commits reachable on both sides; an attempt whose name is taken on the remote by a
different commit (two clones both reverted their iteration 3) is pushed as <N>-<short sha> beside it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kgit import config
from kgit.errors import KgitError
from kgit.git import notes, read, refs, remote as remotes, write
from kgit.git.command import GitError, Repo
from kgit.model import decide, kernel_name
from kgit.share import hooks, join, screen


def check_remote(repo: Repo, remote: str) -> None:
    if remote not in remotes.remotes(repo):
        raise KgitError(f"no remote named {remote!r} in this repository ('git remote -v' lists them)")


def bundle_name(repo: Repo, source: str) -> str | None:
    """The name kgit gives a git bundle's refs (bundle-<file stem>), when source is a bundle file."""
    path = repo.root / source if not Path(source).is_absolute() else Path(source)
    if source in remotes.remotes(repo) or not path.is_file():
        return None
    if not remotes.is_bundle(repo, path):
        raise KgitError(f"{source} is neither a remote of this repository nor a git bundle kgit can read "
                        "(git bundle verify says why)")
    return "bundle-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", path.stem).strip("-") or "records")


def fetch(repo: Repo, remote: str, source: str | None = None) -> None:
    """Fetch the remote's kgit refs beside ours (from source, a bundle's path, when given); globs, so
    that a remote without some of them is fine."""
    remotes.fetch(repo, source or remote, [
        f"+{refs.BRANCHES}*:{refs.remote_branch_ref(remote, '*')}",
        f"+{refs.TAGS}*:{refs.remote_snapshot(remote, refs.TAG_PREFIX)}*",
        f"+refs/notes/*:{refs.remote_snapshot(remote, 'notes/')}*",
        f"+{refs.ATTEMPTS}/*:{refs.remote_snapshot(remote, 'attempts/')}*",
    ])


def merge_notes(repo: Repo, remote: str) -> tuple[int | None, list[screen.Refused]]:
    """Bring the remote's records into refs/notes/kgit; the number of records that were new here (None
    when the remote holds no records at all), and those refused (kgit.share.screen), kept aside."""
    theirs_ref = refs.remote_snapshot(remote, "notes/kgit")
    theirs = read.rev(repo, theirs_ref)
    if theirs is None:
        return None, []
    ours = read.rev(repo, refs.NOTES_REF)
    if theirs == ours or (ours and read.is_ancestor(repo, theirs, ours)):
        return 0, []
    mine = notes.read_notes(repo).by_commit
    accepted, refused = screen.screen(repo, remote, theirs_ref, mine)
    changed = {}
    for commit, records in accepted.items():
        merged = notes.union(mine.get(commit, []), records)
        if merged != mine.get(commit):
            changed[commit] = merged
    if refused:
        screen.keep(repo, remote, theirs, refused)
    if not refused and (ours is None or read.is_ancestor(repo, ours, theirs)):
        write.set_ref(repo, refs.NOTES_REF, theirs)  # nothing of ours is missing there: fast-forward
    else:  # theirs as a parent: what was refused is not offered again until the remote's notes move
        write.write_notes(repo, changed, f"kgit: merge the records of {remote}", merge=theirs)
    return sum(len(records) - len(mine.get(commit, [])) for commit, records in changed.items()), refused


def pull(repo: Repo, remote: str, take: str | None = None) -> tuple[list[str], int]:
    """Fetch and merge the kgit refs of a remote, or of a git bundle file (records committed as
    bundles travel so); what happened, a line each, and how many things were refused or not updated.
    take: which line goes on where a kernel's branch forked (kgit.share.join), "ours" or "theirs"."""
    source = None
    bundle = bundle_name(repo, remote)
    if bundle:
        source, remote = str(Path(remote).resolve()), bundle
    else:
        check_remote(repo, remote)
    write.configure_notes(repo)  # a clone that never ran 'kgit start' rebases pulled branches too
    fetch(repo, remote, source)
    bad_names = _refuse_bad_names(repo, remote)
    added, refused = merge_notes(repo, remote)
    if added is not None:
        done = [f"records: {added} new from {remote}"]
    elif source:
        done = [f"records: none in {Path(source).name}"]
    else:  # a plain 'git push' sends branches and tags but no notes: say where the records are
        done = [f"records: none on {remote} ('git push' sends no records: 'kgit push {remote}' in the clone "
                "that ran the loop sends them)"]
    done += [f"refused: {r.describe()} (kept under {refs.QUARANTINE}{remote}; 'kgit doctor' lists it)"
             for r in refused] + bad_names
    prefix = refs.remote_branch_ref(remote, "")
    not_done = 0
    for ref, theirs in sorted(read.refs_under(repo, prefix).items()):
        kernel = ref[len(prefix):]
        lines = _pull_branch(repo, remote, kernel, theirs, take)
        not_done += sum(line.startswith(("refused:", f"{refs.branch(kernel)}: not updated")) for line in lines)
        done += lines
    return done, len(refused) + len(bad_names) + not_done


def _refuse_bad_names(repo: Repo, remote: str) -> list[str]:
    """Drop the fetched branches and tags whose name is no kernel's (a branch 'opt/a/b' or 'opt/-x'
    would become a branch, a tag and a path here); a line each."""
    lines = []
    for prefix, made in ((refs.remote_branch_ref(remote, ""), refs.branch),
                         (refs.remote_snapshot(remote, refs.TAG_PREFIX), refs.tag)):
        for ref in sorted(read.refs_under(repo, prefix)):
            name = ref[len(prefix):]
            try:
                kernel_name.check(name)
            except KgitError:
                write.delete_ref(repo, ref)
                lines.append(f"refused: {made(name)[:100]!r} of {remote}, not created: it names no valid kernel "
                             "(letters, digits, '.', '_' and '-')")
    return lines


def _pull_branch(repo: Repo, remote: str, kernel: str, theirs: str, take: str | None) -> list[str]:
    """What pulling one branch did, a line each; a line that starts 'refused:' or '<branch>: not updated'
    counts as not done (the pull exits non-zero)."""
    branch = refs.branch(kernel)
    ours = read.rev(repo, refs.branch_ref(kernel))
    if ours == theirs or (ours is not None and read.is_ancestor(repo, theirs, ours)):
        _follow_records(repo, kernel)  # the remote's tag was judged when the branch last moved
        return [f"{branch}: up to date" if ours == theirs else
                f"{branch}: ahead of {remote} ('kgit push {remote}' sends it)"]
    by_commit = notes.read_notes(repo).by_commit
    problem = hooks.tip_problem(repo, kernel, theirs, by_commit, kernel_only=True)
    if problem:  # a tip whose record was refused (a forged figure, say) or never made: not taken
        return [f"refused: {remote}'s {branch} ({theirs[:10]}), not taken: {problem}"]
    elsewhere = read.checked_out_elsewhere(repo, refs.branch_ref(kernel))
    if ours is not None and elsewhere:  # moved under it, that checkout would show the pulled work undone
        return [(f"{branch}: not updated, it is checked out in {elsewhere}: run 'kgit pull {remote}' there")]
    if ours is None:
        write.create_branch(repo, kernel, theirs)
        if remote in remotes.remotes(repo):  # a bundle's branches have no remote to track
            remotes.set_upstream(repo, refs.branch(kernel), remote)
        done = [f"{branch}: new to {theirs[:10]}"]
    elif read.is_ancestor(repo, ours, theirs):
        if not _moved(repo, kernel, ours, theirs):
            return [_held_by_edits(branch)]
        done = [f"{branch}: fast-forwarded to {theirs[:10]}"]
    elif read.merge_base(repo, ours, theirs) is None:  # nothing to join them at: another repository's run
        return [f"{branch}: not updated, {remote}'s shares no history with this clone's (a run of {kernel} made "
                f"in another repository): its records are merged here, and 'kgit log {kernel}' shows each run "
                f"apart; its branch stays at {refs.remote_branch_ref(remote, kernel)}"]
    else:
        found = join.lines(repo, kernel, ours, theirs, by_commit)
        if found.forked and take is None:
            return [_forked(repo, remote, found)]
        first = found.going_on(take)
        joined = join.join(repo, found, first, remote)
        if not _moved(repo, kernel, ours, joined):
            return [_held_by_edits(branch)]
        if first == join.OURS:
            why = (f"{remote}'s line taken in below it" if found.forked else
                   f"this clone's rewrite goes on, {remote}'s earlier copies of its runs below it" if found.rewritten
                   and not found.kept_ours else
                   f"this clone's line goes on: {remote}'s kept no kernel since they parted")
        else:
            why = (f"{remote}'s line goes on, as asked; this clone's stays in the branch's history" if found.forked
                   else f"{remote}'s line goes on: this clone's kept no kernel since they parted")
        done = [f"{branch}: joined with {remote}'s at {joined[:10]} ({why})"]
    _follow_records(repo, kernel)
    return done + _check_their_tag(repo, remote, kernel, theirs)


def _follow_records(repo: Repo, kernel: str) -> None:
    """Put best/<kernel> on the branch's best by its records (a plain `git pull` moves the branch and
    leaves the tag behind)."""
    best = _branch_best(repo, kernel)
    if best is not None:
        write.set_tag(repo, kernel, best)


def _branch_best(repo: Repo, kernel: str) -> str | None:
    """The commit of opt/<kernel>'s best kept iteration by the records here, the one best/ belongs on."""
    best = decide.best_pair(notes.deciding_history(repo, kernel).pairs)
    return best[0] if best else None


def _check_their_tag(repo: Repo, remote: str, kernel: str, theirs: str) -> list[str]:
    """A 'refused:' line when the remote's best/ tag is not the best of the remote's own branch by its
    records (a tag moved by hand, or forged): never taken, the tag here follows the records."""
    tag = read.rev(repo, refs.remote_snapshot(remote, refs.tag(kernel)))
    if tag is None:
        return []
    # every note on their line, copies too: a run whose branch was rewritten here after it was pushed is
    # on both lines, and on theirs at the commit their tag names
    by_commit = notes.read_kernel_notes(repo, kernel).by_commit
    line = read.first_parents(repo, theirs, limit=1_000_000)
    their_best = decide.best_pair([(sha, r) for sha in line for r in by_commit.get(sha, [])])
    if their_best is not None and tag == their_best[0]:
        return []
    return [f"refused: {remote}'s {refs.tag(kernel)} ({tag[:10]}), it is not the best kept iteration of its "
            f"{refs.branch(kernel)} by the records: {refs.tag(kernel)} here follows this clone's records"]


def _moved(repo: Repo, kernel: str, old: str, new: str) -> bool:
    """Move opt/<kernel> from old to its descendant new; False when uncommitted edits are in the way."""
    try:
        write.fast_forward(repo, kernel, old, new)
    except GitError:  # git's --ff-only refuses to overwrite edits the move would touch
        return False
    return True


def _held_by_edits(branch: str) -> str:
    return (f"{branch}: not updated, uncommitted edits in this checkout are in the way (files the pull would change): "
            "'kgit step' them or 'git stash' them, then pull again")


def _forked(repo: Repo, remote: str, found: join.Lines) -> str:
    """The line that says a kernel's branch forked: both clones kept kernels since they parted."""
    branch, kernel = refs.branch(found.kernel), found.kernel
    pinned = join.pin(repo, kernel, remote, found.theirs)
    try:
        cfg = config.load(repo.root, kernel)
        lower, measure_both = cfg.lower_is_better, (f"; to measure theirs against this clone's on one GPU: 'git checkout "
                                                    f"{pinned} -- {cfg.kernel_path}', then 'kgit step'")
    except KgitError:
        lower, measure_both = False, ""
    iterations = lambda kept: ", ".join(str(r.iteration) for _, r in kept)  # noqa: E731
    return (f"{branch}: not updated, forked: this clone kept iteration(s) {iterations(found.kept_ours)} and "
            f"{remote} kept {iterations(found.kept_theirs)} since they parted; "
            f"{join.which_measured_better(found, lower)}; {remote}'s line is pinned at {pinned}; "
            f"'kgit pull {remote} --take theirs' makes it the line that goes on, '--take ours' keeps this one "
            f"(either keeps the other in the branch's history){measure_both}")


@dataclass
class Pushed:
    """What kgit push did, as data (render.commands.push says it in lines)."""

    remote: str
    summaries: list  # model.runs.Summary: one per kernel and device
    merged: int = 0  # records new from the remote, merged before the push
    refused: list = field(default_factory=list)  # screen.Refused: the remote's records kept aside
    not_sent: list = field(default_factory=list)  # (ref name, why, what to do) held back here or rejected
    held_records: int = 0  # records on commits the remote will not have: they stay here
    sent: list = field(default_factory=list)  # the branch and tag names the remote has now
    attempts: int = 0  # attempt refs sent
    nothing: bool = False  # nothing to push at all
    raced: bool = False  # the remote refused a ref that another push was updating at the same moment

    @property
    def unsent(self) -> int:
        return len(self.not_sent)


def push(repo: Repo, remote: str) -> Pushed:
    """Send every kernel's branch, tag, records and attempts; what was sent, and what was not and why
    (branches and tags held back here, or any ref the remote rejected).

    Refuses before touching anything when a branch's tip has no valid record (hooks.tip_problem).
    """
    check_remote(repo, remote)
    where = Path(remotes.url(repo, remote))
    if (where if where.is_absolute() else repo.root / where).is_file():
        raise KgitError(f"{remote} is a git bundle ({where}), which git cannot push to",
                        "push to a repository, or write the records to a new bundle with 'git bundle create "
                        "FILE --branches=opt/* --tags=best/* --glob=refs/kgit/attempts/* refs/notes/kgit'")
    tips = {ref[len(refs.BRANCHES):]: sha for ref, sha in read.refs_under(repo, refs.BRANCHES).items()}
    by_commit = notes.read_notes(repo).by_commit
    hooks.check_tips(repo, tips, by_commit, from_hook=False)
    fetch(repo, remote)
    before = read.rev(repo, refs.NOTES_REF)
    added, refused = merge_notes(repo, remote)
    done = Pushed(remote, [], merged=added or 0, refused=refused)
    notes_sha = read.rev(repo, refs.NOTES_REF)
    if notes_sha != before:
        by_commit = notes.read_notes(repo).by_commit  # the merged records: what the push sends

    refspecs, pushed_tips = [], []
    for kernel, tip in sorted(tips.items()):
        branch, tag = refs.branch(kernel), refs.tag(kernel)
        theirs = read.rev(repo, refs.remote_branch_ref(remote, kernel))
        if theirs is not None and not read.is_ancestor(repo, theirs, tip):
            done.not_sent.append((branch, f"{remote}'s has commits this clone lacks", f"'kgit pull {remote}' first"))
            continue
        refspecs.append(f"refs/heads/{branch}:refs/heads/{branch}")
        pushed_tips.append(tip)
        spec, why = _tag_refspec(repo, kernel, tip)
        if spec:
            refspecs.append(spec)
        elif why:
            done.not_sent.append((tag, why, "'kgit doctor --fix' moves it"))
    records, done.held_records = _records_refspecs(repo, remote, notes_sha, by_commit, pushed_tips)
    refspecs += records
    if not refspecs:
        done.nothing = True
        return done

    results = _sent(repo, remote, refspecs)
    targets = [spec.lstrip("+").split(":", 1)[1] for spec in refspecs]
    done.not_sent += [(t, f"rejected by {remote} {results[t]}", None) for t in targets if results.get(t)]
    done.raced = any(words in why for why in results.values() for words in _RACED)
    pushed = [t for t in targets if results.get(t) == ""]
    done.sent = [t.removeprefix("refs/heads/").removeprefix("refs/tags/") for t in pushed
                 if not t.startswith(refs.ATTEMPTS)]
    done.attempts = len(pushed) - len(done.sent)
    done.summaries = hooks.summary(by_commit, sorted(tips))
    return done


def send_records(repo: Repo, remote: str, behind: hooks.LeftBehind) -> str:
    """From the pre-push hook of a plain `git push` of opt/ branches: send the records and attempts that
    push leaves behind (git pushes no notes unless asked), and each kernel's best/ tag where it is the
    best of the line pushed and the push does not carry it, as kgit push would, so that the remote and
    a teammate's pull find the run whole at once. One line: what was sent, or why not (the user's push
    goes on either way)."""
    tips = behind.tips
    if remote not in remotes.remotes(repo):
        return f"the records stay here: {remote} is not a named remote; 'kgit push REMOTE' sends them"
    try:
        fetch(repo, remote)
        added, refused = merge_notes(repo, remote)
        notes_sha = read.rev(repo, refs.NOTES_REF)
        if notes_sha is None:
            return "no records to send"
        refspecs, held = _records_refspecs(repo, remote, notes_sha, notes.read_notes(repo).by_commit,
                                           list(tips.values()))
        for kernel, tip in sorted(tips.items()):
            if kernel in behind.tags_carried:
                continue  # the push sends it: sent first from here, git's own would be refused
            spec, _ = _tag_refspec(repo, kernel, tip)
            refspecs += [spec] if spec else []
        rejected = {target: why for target, why in _sent(repo, remote, refspecs).items() if why}
    except GitError as e:
        return f"the records were not sent ({e}): 'kgit push {remote}' sends them"
    if rejected:
        return (f"the records were not all sent ({', '.join(f'{t}: {why}' for t, why in sorted(rejected.items()))}): "
                f"'kgit push {remote}' sends them")
    merged = f", {added} of {remote}'s merged here first" if added else ""
    aside = f", {len(refused)} of {remote}'s refused (kept aside: 'kgit doctor')" if refused else ""
    stay = f"; {held} on commits {remote} will not have stay here" if held else ""
    return f"the records were sent with this push{merged}{aside}{stay}"


# What git says when another push updated the same ref of the remote at the same moment: nothing is
# wrong with this push, which goes through when it is run again (after a pull, where the branch moved).
_RACED = ("failed to update ref", "cannot lock ref", "incorrect old value")


def _tag_refspec(repo: Repo, kernel: str, tip: str) -> tuple[str | None, str | None]:
    """The refspec that sends kernel's best/ tag beside its branch at tip, or why the tag stays here:
    sent, a tag off the best kept iteration of that line would move the remote's best to a worse kernel.
    (None, None) where the kernel has no tag."""
    tagged = read.rev(repo, refs.tag_ref(kernel))
    if tagged is None:
        return None, None
    on_line = read.is_ancestor(repo, tagged, tip)
    if on_line and tagged == _branch_best(repo, kernel):
        tag = refs.tag(kernel)
        return f"+refs/tags/{tag}:refs/tags/{tag}", None  # best/ moves by design, along its branch
    where = "points off" if not on_line else "is not on the best kept iteration of"
    return None, f"it {where} {refs.branch(kernel)}"


def _records_refspecs(repo: Repo, remote: str, notes_sha: str | None, by_commit: dict,
                      tips: list[str]) -> tuple[list[str], int]:
    """The refspecs of the records and attempts to send beside these branch tips, and how many records
    stay here (on commits the remote will not have)."""
    attempts = _attempt_refspecs(repo, remote)
    if not notes_sha:
        return attempts, 0
    notes_sha, held = _outgoing_notes(repo, remote, notes_sha, by_commit, tips,
                                      [spec.split(":", 1)[0] for spec in attempts])
    return [f"{notes_sha}:{refs.NOTES_REF}", *attempts], held


def _sent(repo: Repo, remote: str, refspecs: list[str]) -> dict[str, str]:
    """Push these refspecs (never through kgit's own hook: its checks are done) and remember the attempts
    and notes the remote took; the result of each remote ref, '' or git's reason."""
    results = remotes.push(repo, remote, refspecs, env={hooks.PUSHING_ENV: "1"})
    for spec in refspecs:
        source, target = spec.lstrip("+").split(":", 1)
        if results.get(target) != "":
            continue
        if target.startswith(refs.ATTEMPTS + "/"):
            write.set_ref(repo, refs.remote_snapshot(remote, "attempts/" + target[len(refs.ATTEMPTS) + 1:]), source)
        elif target == refs.NOTES_REF:
            write.set_ref(repo, refs.remote_snapshot(remote, "notes/kgit"), source)  # what the hook checks
    return results


def _outgoing_notes(repo: Repo, remote: str, notes_sha: str, by_commit: dict, tips: list[str],
                    attempts: list[str]) -> tuple[str, int]:
    """The notes commit to push (notes_sha, refs/notes/kgit's, or one without some records), and how many of
    this clone's records it leaves out.

    Only records on commits the remote will have travel: one on a commit that stays here (a branch the
    remote refused, a baseline a reset left behind) would show there as a run nobody can check out. A
    commit that only an attempt reaches (an attempt stepped on a line whose branch is not pushed yet)
    carries its reverted records, not a kept iteration: that waits for its branch, else every other clone
    would refuse it as a kept iteration on no opt/<kernel>. When every note qualifies, and the remote has
    no record this clone lacks, that is refs/notes/kgit itself; else a commit on top of the remote's notes
    that adds the rest and deletes none of the remote's (refs/kgit/outgoing-notes), and refs/notes/kgit
    keeps every record here.
    """
    snapshot = refs.remote_snapshot(remote, "")
    on_branches = read.reachable_from(repo, set(by_commit), [*tips, f"--glob={refs.remote_branch_ref(remote, '*')}",
                                                             f"--glob={snapshot}best/*"])
    by_attempts = read.reachable_from(repo, set(by_commit) - on_branches, [*attempts, f"--glob={snapshot}attempts/*"])
    sent = {c: by_commit[c] for c in on_branches}
    sent.update({c: reverted for c in by_attempts if (reverted := [r for r in by_commit[c] if not r.status.on_branch])})
    held = sum(len(records) for records in by_commit.values()) - sum(len(records) for records in sent.values())
    theirs = read.rev(repo, refs.remote_snapshot(remote, "notes/kgit"))
    there = notes.read_notes(repo, theirs).by_commit if theirs else {}
    # records the remote has and this clone does not (one its screen refused, kept under quarantine): a
    # push never deletes them there
    lacking = {c for c, records in there.items()
               if {r.key for r in records} - {r.key for r in by_commit.get(c, [])}}
    if not held and not lacking:
        return notes_sha, 0
    if read.rev(repo, refs.OUTGOING_NOTES):
        write.delete_ref(repo, refs.OUTGOING_NOTES)  # it starts on the remote's notes, not on what it was
    outgoing = write.write_notes(repo, {c: notes.union(sent.get(c, []), there.get(c, []))
                                        for c in sorted(set(sent) | lacking)},
                                 f"kgit: the records {remote} can check out", ref=refs.OUTGOING_NOTES, parent=theirs)
    return outgoing, held


def _attempt_refspecs(repo: Repo, remote: str) -> list[str]:
    """Push each attempt the remote lacks, under its own name unless another commit has that name there."""
    prefix = refs.ATTEMPTS + "/"
    snapshot = refs.remote_snapshot(remote, "attempts/")
    known = {ref[len(snapshot):]: sha for ref, sha in read.refs_under(repo, snapshot).items()}
    there = set(known.values())
    specs = []
    for ref, sha in sorted(read.refs_under(repo, prefix).items()):
        if sha in there:
            continue
        name = ref[len(prefix):]
        if name in known:
            name = f"{name}-{sha[:10]}"
        specs.append(f"{sha}:{prefix}{name}")
    return specs
