"""The ``.leanrig/emacs.el`` `leanrig edit` writes: the workspace's Lean files reach `leanrig lsp`.

Works with lsp-mode or eglot, with or without lean4-mode. Renders text; must not start a process."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

CHECK_KEY = "C-c C-v"


def _el(value: str | Path) -> str:
    """An Emacs Lisp string literal (JSON's escapes are Emacs Lisp's too)."""
    return json.dumps(str(value), ensure_ascii=False)


def open_command(config: Path, task_file: Path) -> str:
    return f"emacs -l {shlex.quote(str(config))} {shlex.quote(str(task_file))}"


def emacs_config(*, root: Path, shim_dir: Path, task_file: Path, task_id: str) -> str:
    workspace = str(root).rstrip("/") + "/"
    server = f'(list {_el(shim_dir / "lean")} "--server")'
    command = open_command(shim_dir.parent / "emacs.el", task_file)
    header = f""";;; emacs.el --- leanrig: the attempt -*- lexical-binding: t; coding: utf-8 -*-

;; Written by `leanrig edit' for task {task_id}.  Open the attempt with
;;   {command}
;; Every .lean file under {workspace} is served by {shim_dir / "lean"} --server,
;; which is `leanrig lsp' (edits scoped to the proof body, the attempt's clock, ledger and
;; verdict), whatever `lean' is on PATH.  The client is lsp-mode where it is installed, else
;; eglot; to choose, evaluate (setq leanrig-client 'eglot) or (setq leanrig-client 'lsp-mode)
;; before this file is loaded.  The verdict: M-x leanrig-check-proof ({CHECK_KEY}).

(defvar leanrig-client nil
  "The LSP client of this attempt: `lsp-mode', `eglot', or nil (lsp-mode if installed).")
(defconst leanrig-workspace {_el(workspace)})
(defconst leanrig-shim-dir {_el(shim_dir)})
(defconst leanrig-server-command {server})
(defvar leanrig-verdict-timeout 600
  "Seconds `leanrig-check-proof' waits for the verdict.")
"""
    return header + _BODY


_BODY = r"""
(require 'cl-lib)
(require 'package)

;; Packages installed for Emacs (Debian's elpa-lsp-mode, elpa-eglot) are activated without an
;; init file too (emacs -q, --batch): lsp-mode calls some of their autoloads at its start.
(unless (or (bound-and-true-p package--activated)
            (featurep 'lsp-mode-autoloads) (featurep 'eglot-autoloads))
  (package-activate-all))

;; Debian's packages are compiled to native code on their first use: the compiler's warnings
;; would split the window as the attempt starts.
(when (boundp 'native-comp-async-report-warnings-errors)
  (setq native-comp-async-report-warnings-errors 'silent))

;; Any `lean' or `lake' this Emacs starts is the workspace's shim: its server is leanrig (any
;; other use runs the real Lean).
(setenv "PATH" (concat leanrig-shim-dir path-separator (getenv "PATH")))
(add-to-list 'exec-path leanrig-shim-dir)

(defun leanrig--client ()
  "The LSP client to use: `leanrig-client', else lsp-mode if installed, else eglot."
  (or leanrig-client (if (locate-library "lsp-mode") 'lsp-mode 'eglot)))

(defun leanrig--file-p (file)
  "Is FILE a Lean file in this attempt's workspace?"
  (and file (string-suffix-p ".lean" file)
       (string-prefix-p leanrig-workspace (file-truename file))))

;; The major mode: lean4-mode where installed, else a minimal one.
(unless (fboundp 'lean4-mode)
  (require 'lean4-mode nil t))
(defvar leanrig-lean-mode-syntax-table
  (let ((table (make-syntax-table)))
    (modify-syntax-entry ?/ ". 14nb" table)
    (modify-syntax-entry ?- ". 123" table)
    (modify-syntax-entry ?\n ">" table)
    (modify-syntax-entry ?\" "\"" table)
    (modify-syntax-entry ?\\ "\\" table)
    (modify-syntax-entry ?_ "w" table)
    (modify-syntax-entry ?' "w" table)
    (modify-syntax-entry ?. "_" table)
    table)
  "Lean's comments (-- and nested /- -/) and strings.")
(define-derived-mode leanrig-lean-mode prog-mode "Lean"
  "A minimal mode for Lean 4 files where lean4-mode is not installed (leanrig)."
  :syntax-table leanrig-lean-mode-syntax-table
  (setq-local comment-start "-- ")
  (setq-local comment-start-skip "--+[ \t]*\\|/-+[ \t]*")
  (setq-local comment-end ""))
(unless (fboundp 'lean4-mode)
  (add-to-list 'auto-mode-alist '("\\.lean\\'" . leanrig-lean-mode)))
(put 'leanrig-lean-mode 'eglot-language-id "lean4")

(defvar leanrig-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "C-c C-v") #'leanrig-check-proof)
    map)
  "Keys of `leanrig-mode'.")
(define-minor-mode leanrig-mode
  "A Lean file of a leanrig attempt: \\[leanrig-check-proof] asks for the verdict."
  :lighter " leanrig" :keymap leanrig-mode-map)

;; lsp-mode: a client of its own for the workspace's Lean files, above any other Lean client.
(defun leanrig--lsp-register ()
  "Register lsp-mode's client for this attempt's server."
  (add-to-list 'lsp-language-id-configuration '(leanrig-lean-mode . "lean4"))
  (add-to-list 'lsp-language-id-configuration '(lean4-mode . "lean4"))
  (lsp-register-client
   (make-lsp-client
    :new-connection (lsp-stdio-connection (lambda () leanrig-server-command))
    :activation-fn (lambda (file _mode) (leanrig--file-p file))
    :language-id "lean4"
    :priority 100
    :server-id 'leanrig
    :notification-handlers (let ((handlers (make-hash-table :test #'equal)))
                             (puthash "$/lean/fileProgress" #'ignore handlers)
                             handlers))))
(defun leanrig--lsp-folder ()
  "The workspace is a folder of lsp-mode's session: no question which root it is."
  ;; (Evaluated when called: the place is lsp-mode's, which may load after this file.)
  (eval '(cl-pushnew (lsp-f-canonical leanrig-workspace) (lsp-session-folders (lsp-session))
                     :test #'equal)
        t))
(when (eq (leanrig--client) 'lsp-mode)
  (require 'lsp-mode)
  (leanrig--lsp-register)
  (leanrig--lsp-folder))

;; eglot: the server program for Lean modes, first in the list; the workspace is the project;
;; leanrig's undo of an outside edit is applied without asking.
(defun leanrig--project (dir)
  "The workspace as a project, for DIR inside it."
  (when (string-prefix-p leanrig-workspace (file-name-as-directory (file-truename dir)))
    (cons 'transient leanrig-workspace)))
(add-hook 'project-find-functions #'leanrig--project)
(with-eval-after-load 'eglot
  (add-to-list 'eglot-server-programs
               (cons '((leanrig-lean-mode :language-id "lean4")
                       (lean4-mode :language-id "lean4"))
                     leanrig-server-command))
  (setq eglot-confirm-server-initiated-edits nil))

(defun leanrig--start ()
  "Start (or join) the attempt's server, `leanrig lsp', in a workspace Lean buffer."
  (when (leanrig--file-p buffer-file-name)
    (leanrig-mode 1)
    (if (eq (leanrig--client) 'eglot)
        (progn
          (require 'eglot)
          (unless (eglot-current-server)
            (apply #'eglot (eglot--guess-contact))))
      (leanrig--lsp-folder)
      (unless (bound-and-true-p lsp-mode)
        (lsp)))))
(add-hook 'find-file-hook #'leanrig--start)
(dolist (buffer (buffer-list))
  (with-current-buffer buffer (leanrig--start)))

(defun leanrig--field (object key)
  "KEY of a JSON OBJECT as lsp-mode (a hash table) or eglot (a plist) parsed it."
  (cond ((hash-table-p object) (gethash key object))
        ((listp object) (plist-get object (intern (concat ":" key))))))

(defun leanrig-check-proof ()
  "Ask leanrig for the verdict on the proof Lean has now; show its line; return the answer."
  (interactive)
  (let* ((params (list :command "leanrig.checkProof" :arguments []))
         (answer (if (bound-and-true-p eglot--managed-mode)
                     (jsonrpc-request (eglot--current-server-or-lose)
                                      :workspace/executeCommand params
                                      :timeout leanrig-verdict-timeout)
                   (let ((lsp-response-timeout leanrig-verdict-timeout))
                     (lsp-request "workspace/executeCommand" params))))
         (line (leanrig--field answer "message")))
    (message "%s" (or line (format "leanrig: %S" answer)))
    answer))

;; Quitting Emacs: eglot's servers are told `shutdown' and `exit' first (lsp-mode does this
;; itself), so the attempt's records say the editor closed, not that it was cut off.
(defun leanrig--eglot-goodbye ()
  "Shut down this attempt's eglot servers."
  (when (featurep 'eglot)
    (let (servers)
      (dolist (buffer (buffer-list))
        (with-current-buffer buffer
          (when (and (leanrig--file-p buffer-file-name) (bound-and-true-p eglot--managed-mode))
            (cl-pushnew (eglot-current-server) servers))))
      (dolist (server servers)
        (when (and server (jsonrpc-running-p server))
          (ignore-errors (eglot-shutdown server nil 2)))))))
(add-hook 'kill-emacs-hook #'leanrig--eglot-goodbye)

;;; emacs.el ends here
"""
