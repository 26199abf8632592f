"""The live dashboard (``activeeval dashboard``): a local page that shows running sessions as they are written.

:mod:`~activeeval.dashboard.data` reads sessions (read-only, through the
public session API) into plain dicts; :mod:`~activeeval.dashboard.server`
serves them and ``page.html`` with Starlette and uvicorn
(``pip install "activeeval[dashboard]"``).
"""
