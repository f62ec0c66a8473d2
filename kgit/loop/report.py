"""experiments/README.md (or report_path): the log rendered from the records, as a step, a start, a
recovery, a join and `kgit report` commit it."""

from __future__ import annotations

from kgit import config
from kgit.errors import KgitError
from kgit.git import notes, read, refs, write
from kgit.git.command import Repo
from kgit.model.record import Record
from kgit.render.readme import is_kgits, render_kernel, render_readme
from kgit.state import rendered


def readme_text(repo: Repo, path: str, base: str, extra: Record | None = None) -> tuple[str, str | None]:
    """The log rendered from every record, with extra (the record being written: its note may already
    be there after a crash) in place of its earlier copy, over the rendering in commit base; and the
    notes commit whose records it renders, extra's note aside (None where extra's run had a note).

    A step's record changes its kernel's sections alone: where the rendering in base is up to date
    with every other kernel's records (kgit.state.rendered), only that kernel's records are read and
    rendered, and the text is the same.
    """
    tip, blob = read.object_ids(repo, [f"{refs.NOTES_REF}^{{commit}}", f"{base}:{path}"])
    previous = read.file_at(repo, path, base) if blob else None
    since = rendered.notes_of(repo, blob)
    changed = notes.kernels_changed(repo, since, tip) if since and tip else None
    if extra is not None and changed is not None and changed <= {extra.kernel}:
        records = notes.kernel_history(repo, extra.kernel).records
        text = render_kernel(extra.kernel, _with(records, extra), previous)
    else:
        records = [r for _, r in notes.records_with_commits(repo, notes.read_notes(repo, tip or refs.NOTES_REF))]
        text = render_readme(_with(records, extra), previous)
    fresh = extra is None or all(r.key != extra.key for r in records)
    return text, tip if fresh else None


def with_record(repo: Repo, base: str, record: Record) -> tuple[dict[str, str], str | None]:
    """{path: the log rendered over base's with the record}, as a step's commit carries it, and the
    notes commit it renders (readme_text)."""
    path = config.report_path(repo.root)
    text, rendered_from = readme_text(repo, path, base, record)
    return {path: text}, rendered_from


def _with(records: list[Record], extra: Record | None) -> list[Record]:
    return records if extra is None else [r for r in records if r.key != extra.key] + [extra]


def commit_report(repo: Repo) -> str | None:
    """Commit a fresh rendering of experiments/README.md on the current branch; None if unchanged."""
    head = read.rev(repo, "HEAD")
    if head is None:
        raise KgitError("the repository has no commit yet")
    path = config.report_path(repo.root)
    if path in read.modified_tracked_files(repo):
        raise KgitError(f"{path} has uncommitted edits; kgit renders it from the notes",
                        "commit or discard them first")
    check_readme_is_ours(repo)
    if read.rev(repo, refs.NOTES_REF) is None:  # rendering nothing would delete every result shown
        raise KgitError(f"no kgit records in this clone ({refs.NOTES_REF} is missing; 'kgit pull' fetches it "
                        f"from a remote): {path} is left as it is")
    text, rendered_from = readme_text(repo, path, head)
    if read.file_at(repo, path) == text:
        rendered.remember(repo, head, path, rendered_from)
        return None
    commit = write.commit_with_files(repo, head, head, {path: text}, refs.report_subject(path))
    write.move_head(repo, commit)
    rendered.remember(repo, commit, path, rendered_from)
    return commit


def check_readme_is_ours(repo: Repo) -> None:
    """Refuse to render the log into a file kgit did not write (it lacks kgit's mark), committed or not."""
    path = config.report_path(repo.root)
    texts = [read.file_at(repo, path, "HEAD")]
    if (repo.root / path).is_file():
        texts.append((repo.root / path).read_text(errors="replace"))
    if any(text is not None and not is_kgits(text) for text in texts):
        raise KgitError(f"{path} was not written by kgit, which never writes over your files",
                        "choose where kgit renders its log with a top-level 'report_path: experiments/kgit.md' "
                        "in kgit.yaml")
