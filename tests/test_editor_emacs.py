"""Emacs in batch (lsp-mode or eglot) opening the attempt as docs/human-baselines.md says, with a
fake `lean` first on PATH, driven by an Emacs Lisp script; then quit three ways, and the
attempt's records read."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from agent_tools.editor import EditOptions, EditWorkspace, prepare_workspace
from agent_tools.editor.human_attempt import body_sha

from .test_human_attempts import closed_records, ended, kill_server, marked

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "lean_project" / "suites" / "demo"
TASK = "and_swap"
PROOF = json.loads((ROOT / "tests" / "demo_reference_proofs.json").read_text())[TASK]
WRONG = "And.intro h.1 h.2"
EMACS = shutil.which("emacs")
DEADLINE = 90.0  # one Emacs session, end to end
MARK = "LEANRIG_TEST_EMACS"  # in the environment of everything a test's Emacs starts


def _has_packages() -> bool:
    """Are lsp-mode and eglot installed for Emacs?"""
    if EMACS is None:
        return False
    probe = (
        '(progn (package-activate-all) (princ (and (locate-library "lsp-mode") '
        '(locate-library "eglot") t)))'
    )
    done = subprocess.run(
        [EMACS, "--batch", "--eval", probe], capture_output=True, text=True, timeout=60, check=False
    )
    return done.stdout.strip() == "t"


pytestmark = pytest.mark.skipif(
    not _has_packages(),
    reason="Emacs with lsp-mode and eglot is not installed (`make setup` installs Debian's "
    "emacs-nox, elpa-lsp-mode and elpa-eglot where apt-get works: scripts/install-emacs.sh)",
)

# Runs the steps in LEANRIG_STEPS, writing each outcome to LEANRIG_OUT at once, so a test that
# kills Emacs still reads what happened before.
DRIVER = r"""
;; -*- lexical-binding: t -*-
(require 'json)
(require 'seq)
(defvar t/out (getenv "LEANRIG_OUT"))
(defvar t/report nil)
(defvar t/warnings nil)
(defvar t/echo nil)
(defvar t/eglot-diags nil)
(defun t/note (name value)
  (setq t/report (append t/report (list (cons name value))))
  (with-temp-file t/out (insert (json-encode t/report))))
(defun t/eglot-p () (eq (leanrig--client) 'eglot))  ; the client .leanrig/emacs.el chose
(defun t/sent ()
  "Send the buffer's changes now: eglot sends them when Emacs is idle, which batch never is."
  (when (t/eglot-p) (eglot--signal-textDocument/didChange)))
(defun t/wait (secs pred)
  (let ((end (+ (float-time) secs)))
    (while (and (not (funcall pred)) (< (float-time) end))
      (t/sent)
      (accept-process-output nil 0.05))
    (funcall pred)))
;; What the human would see: warnings, the echo area, diagnostics as each client has them.
(advice-add 'display-warning :before
            (lambda (_type message &rest _) (push (format "%s" message) t/warnings)))
(advice-add 'message :after
            (lambda (format-string &rest args)
              (when format-string
                (let ((text (apply #'format-message format-string args)))
                  (when (string-prefix-p "leanrig:" text) (setq t/echo text))))))
(with-eval-after-load 'eglot
  (advice-add 'eglot-handle-notification :before
              (lambda (_server method &rest params)
                (when (eq method 'textDocument/publishDiagnostics)
                  (setq t/eglot-diags (append (plist-get params :diagnostics) nil))))))
(defun t/diags ()
  "The task file's diagnostics: (severity source message) each."
  (if (t/eglot-p)
      (mapcar (lambda (d) (list (plist-get d :severity) (plist-get d :source)
                                (plist-get d :message)))
              t/eglot-diags)
    (mapcar (lambda (d) (list (gethash "severity" d) (gethash "source" d) (gethash "message" d)))
            (gethash buffer-file-name (lsp-diagnostics t)))))
(defun t/errors () (seq-filter (lambda (d) (eql (car d) 1)) (t/diags)))
(defun t/leanrig () (seq-filter (lambda (d) (equal (cadr d) "leanrig")) (t/diags)))
(defun t/line-of (text) (save-excursion (goto-char (point-min)) (search-forward text)
                                        (line-number-at-pos)))
(defun t/line (n) (save-excursion (goto-char (point-min)) (forward-line (1- n))
                                  (buffer-substring-no-properties (point) (line-end-position))))
(defun t/set-line (n text)
  (save-excursion (goto-char (point-min)) (forward-line (1- n))
                  (delete-region (point) (line-end-position)) (insert text))
  (t/sent))
(defun t/server-command ()
  (vconcat (mapcar #'vconcat
                   (if (t/eglot-p)
                       (list (process-command (jsonrpc--process (eglot-current-server))))
                     (mapcar (lambda (w) (process-command (lsp--workspace-cmd-proc w)))
                             (lsp-workspaces))))))
(defun t/inlay-hints ()
  "Ask for inlay hints, as an editor that shows them does (Lean then asks for refreshes)."
  (unless (t/eglot-p)
    (lsp-request-async "textDocument/inlayHint"
                       (list :textDocument (lsp--text-document-identifier)
                             :range (list :start (list :line 0 :character 0)
                                          :end (list :line 99 :character 0)))
                       #'ignore)))

(defun t/step (step)
  (pcase step
    ("open"
     (t/note "mode" (symbol-name major-mode))
     ;; eglot connects in the background: on a loaded machine, after the file is open.
     (t/wait 60 (lambda () (if (t/eglot-p) (eglot-current-server) (lsp-workspaces))))
     (t/note "server" (t/server-command))
     (t/note "diagnostics" (and (t/wait 60 (lambda () (t/diags))) t)))
    ("wrong"
     (t/set-line (t/line-of "sorryAx") (concat "  " (getenv "LEANRIG_WRONG")))
     (t/inlay-hints)
     (t/note "wrong proof: errors" (and (t/wait 60 (lambda () (t/errors))) t)))
    ("outside"
     (let* ((line (t/line-of "namespace")) (before (t/line line)))
       (save-excursion (goto-char (point-min)) (forward-line (1- line)) (end-of-line)
                       (insert "X"))
       (t/sent)
       (t/note "outside edit undone" (t/wait 30 (lambda () (equal (t/line line) before))))
       (t/note "notice" (vconcat (mapcar #'caddr (t/wait 30 (lambda () (t/leanrig))))))
       (t/wait 5 (lambda () (seq-every-p (lambda (d) (> (car d) 1)) (t/leanrig))))
       (t/note "notice severities" (vconcat (mapcar #'car (t/leanrig))))))
    ("right"
     (t/set-line (t/line-of (getenv "LEANRIG_WRONG")) (concat "  " (getenv "LEANRIG_PROOF")))
     (t/note "right proof: no errors"
             (t/wait 60 (lambda () (and (null (t/errors)) (null (t/leanrig)))))))
    ("check"
     (let ((answer (leanrig-check-proof)))
       (t/note "accepted" (if (t/eglot-p) (eq (plist-get answer :accepted) t)
                            (eq (gethash "accepted" answer) t)))
       (t/note "echo" t/echo)))
    ("ready"
     (t/note "warnings" (vconcat t/warnings))
     (t/note "ready" t)
     (t/wait 120 (lambda () nil)))
    ("quit"
     (t/note "warnings" (vconcat t/warnings))
     (kill-emacs 0))))

(condition-case err
    (dolist (step (split-string (getenv "LEANRIG_STEPS") ","))
      (t/step step))
  (error (t/note "error" (format "%S" err)) (kill-emacs 3)))
"""

# A stand-in for lean4-mode (not packaged in Debian): `lsp` from the mode's hook, with its own
# client whose server is `lean --server` from PATH.
LEAN4_MODE = r""";;; lean4-mode.el --- lean4-mode's server start -*- lexical-binding: t -*-
(require 'lsp-mode)
(define-derived-mode lean4-mode prog-mode "Lean 4")
(add-to-list 'auto-mode-alist '("\\.lean\\'" . lean4-mode))
(add-to-list 'lsp-language-id-configuration '(lean4-mode . "lean4"))
(lsp-register-client
 (make-lsp-client :new-connection (lsp-stdio-connection '("lean" "--server"))
                  :major-modes '(lean4-mode) :server-id 'lean4-lsp))
(add-hook 'lean4-mode-hook #'lsp)
(provide 'lean4-mode)
"""


class Session:
    """One Emacs started as documented, then the driver, with a fake `lean` first on PATH that
    records being run."""

    def __init__(
        self, tmp_path: Path, steps: str, *, client: str = "lsp-mode", lean4_mode: bool = False
    ) -> None:
        self.tmp = tmp_path
        self.run_dir = tmp_path / "run"
        self.ws: EditWorkspace = prepare_workspace(
            EditOptions(suite=SUITE, task=TASK, workspace=tmp_path / "ws", run_dir=self.run_dir)
        )
        fake = tmp_path / "fake-bin"
        fake.mkdir()
        self.fake_ran = tmp_path / "fake-lean-ran"
        for name in ("lean", "lake"):
            (fake / name).write_text(f'#!/bin/sh\necho "$0 $*" >> {self.fake_ran}\nexit 1\n')
            (fake / name).chmod(0o755)
        (tmp_path / "home").mkdir()
        driver = tmp_path / "driver.el"
        driver.write_text(DRIVER, encoding="utf-8")
        self.out = tmp_path / "emacs.json"
        argv: list[str] = [str(EMACS), "--batch"]
        if lean4_mode:
            site = tmp_path / "site-lisp"
            site.mkdir()
            (site / "lean4-mode.el").write_text(LEAN4_MODE, encoding="utf-8")
            argv += ["-L", str(site)]
        if client == "eglot":
            argv += ["--eval", "(setq leanrig-client 'eglot)"]
        argv += ["-l", str(self.ws.files["emacs"]), str(self.ws.task_file), "-l", str(driver)]
        env = {
            **os.environ,
            "HOME": str(tmp_path / "home"),
            "PATH": f"{fake}{os.pathsep}{os.environ.get('PATH', '')}",
            "LEANRIG_OUT": str(self.out),
            "LEANRIG_STEPS": steps,
            "LEANRIG_PROOF": PROOF,
            "LEANRIG_WRONG": WRONG,
            MARK: str(tmp_path),
        }
        self.stderr = tmp_path / "emacs.stderr"
        with self.stderr.open("wb") as err:
            self.process = subprocess.Popen(
                argv, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=err, stderr=err
            )

    def report(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.out.read_text(encoding="utf-8")))
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def wait_for(self, key: str) -> dict[str, Any]:
        """The driver's report once it has ``key`` (Emacs still running)."""
        deadline = time.monotonic() + DEADLINE
        while key not in (report := self.report()):
            assert self.process.poll() is None, self.failure()
            assert time.monotonic() < deadline, self.failure()
            time.sleep(0.05)
        return report

    def exit_code(self) -> int:
        return self.process.wait(timeout=DEADLINE)

    def failure(self) -> str:
        return f"{self.report()}\n{self.stderr.read_text(errors='replace')[-3000:]}"

    def processes(self) -> list[psutil.Process]:
        """What this Emacs started that still runs, orphans included."""
        return [p for p in marked(MARK, str(self.tmp)) if p.pid != self.process.pid]

    def relay(self) -> psutil.Process:
        """Emacs's server process: `leanrig lsp` as the shim started it."""
        (server,) = [
            p
            for p in psutil.Process(self.process.pid).children()
            if "agent_tools.editor" in " ".join(p.cmdline())
        ]
        return server

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=DEADLINE)


def _documented_and_alone(session: Session, report: dict[str, Any]) -> None:
    """The file opened as documented was served by the workspace's shim alone."""
    shim = [str(session.ws.shim_dir / "lean"), "--server"]
    assert report["server"] == [shim], report
    assert report["diagnostics"] is True, session.failure()
    assert not session.fake_ran.exists(), session.fake_ran.read_text()


@pytest.mark.parametrize("client", ["lsp-mode", "eglot"])
def test_emacs_as_documented_is_served_by_leanrig_alone_and_quits_with_its_records(
    tmp_path: Path, client: str
) -> None:
    """Served by the shim only; errors, the outside-edit revert, acceptance and its echo come
    through, with no warnings; quitting records `shutdown` and the accepted attempt."""
    session = Session(tmp_path, "open,wrong,outside,right,check,quit", client=client)
    try:
        assert session.exit_code() == 0, session.failure()
        report = session.report()
        results, ledger = closed_records(session.run_dir, session.processes)
    finally:
        session.stop()
    _documented_and_alone(session, report)
    assert report["mode"] == "leanrig-lean-mode"
    assert report["wrong proof: errors"] is True
    assert report["outside edit undone"] is True
    assert any("only the proof body" in n for n in report["notice"]), report
    assert report["notice severities"] and 1 not in report["notice severities"], report
    assert report["right proof: no errors"] is True
    assert report["accepted"] is True
    assert report["echo"].startswith(f"leanrig: ACCEPTED — {TASK} proved in"), report
    assert report["warnings"] == [], report["warnings"]
    (line,) = results
    assert line["accepted"] is True and line["final_body_sha"] == body_sha("\n  " + PROOF)
    assert line["notes"] == [], line["notes"]
    assert ended(ledger) == ["shutdown"]
    assert any(e["tool"] == "edit" and e["outcome"] == "rejected" for e in ledger)
    assert [e["tool"] for e in ledger].count("open_task") == 1


def test_emacs_killing_its_server_still_closes_the_attempt(tmp_path: Path) -> None:
    """With a lean4-mode stand-in the server is still the shim; SIGKILL of its process group
    after a wrong proof records the attempt as cut off, with its closing verdict."""
    session = Session(tmp_path, "open,wrong,ready", lean4_mode=True)
    try:
        report = session.wait_for("ready")
        _documented_and_alone(session, report)
        assert report["mode"] == "lean4-mode"
        relay = session.relay()
        kill_server(relay)
        results, ledger = closed_records(session.run_dir, session.processes)
    finally:
        session.stop()
    _killed_attempt(results, ledger)


def test_emacs_killed_still_closes_the_attempt(tmp_path: Path) -> None:
    """Emacs SIGKILLed after a wrong proof: the attempt is recorded as cut off, with its closing
    verdict on the last body, and no process of it is left."""
    session = Session(tmp_path, "open,wrong,ready")
    try:
        session.wait_for("ready")
        session.process.send_signal(signal.SIGKILL)
        session.process.wait(timeout=DEADLINE)
        results, ledger = closed_records(session.run_dir, session.processes)
    finally:
        session.stop()
    _killed_attempt(results, ledger)


def _killed_attempt(results: list[dict[str, Any]], ledger: list[dict[str, Any]]) -> None:
    (line,) = results
    assert line["accepted"] is False and line["final_body_sha"] == body_sha("\n  " + WRONG)
    assert line["reasons"] and line["reasons"] != ["no verdict"], line
    assert any("without `shutdown`" in note for note in line["notes"]), line["notes"]
    assert ended(ledger) == ["cut off"]
    assert [e["tool"] for e in ledger].count("check_proof") == 1  # the closing verdict
