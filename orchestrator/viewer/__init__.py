"""``trialbox view``: a local, read-only web application over run folders.

* ``data``: what the pages show, read from a run folder (its SQLite store opened read-only, its trial files);
  nothing here writes.
* ``app``: the Starlette application (pages and the JSON the pages fetch), served by uvicorn on localhost.
* ``templates/`` (Jinja2, autoescaped) and ``static/`` (the one script and style sheet).

Everything a trial's agent could influence (ids, reasons, evidence, commands, outputs, the diff, the grader's
log) is data on these pages: templates escape it, the script only ever sets ``textContent``, and every page is
served with a Content-Security-Policy that runs no inline script and loads nothing from elsewhere. Raw files are
served as ``text/plain`` in a sandbox, so a workspace file holding HTML is shown as text, never run.
"""
