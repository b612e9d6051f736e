"""The copilot inside gns3-server: HTTP routes, schemas, auth, LLM configs, launcher.

``launcher.main`` (console script ``gns3server-copilot``) mounts everything here
on gns3-server's FastAPI app and runs the server. Nothing in this package does
work at import time: the server-wide state is built on startup and kept on
``app.state.copilot`` (:class:`.state.CopilotState`).
"""
