"""/docs (Swagger UI) and /redoc from assets on this server, never a CDN, so both work offline.

The JavaScript and CSS come from the installed fastapi-offline package (its `static` folder), mounted at
STATIC_URL; the pages themselves are FastAPI's own HTML builders pointed at them. The app is made with
docs_url=None and redoc_url=None so FastAPI adds no CDN pages of its own.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.staticfiles import StaticFiles
from starlette.responses import HTMLResponse

STATIC_URL = "/static-offline-docs"
ASSETS = Path(fastapi_offline.__file__).parent / "static"


def _under_root(request: Request, path: str) -> str:
    """path below the app's root_path (the prefix a proxy mounts the server under)."""
    return f"{request.scope.get('root_path', '')}{path}"


def install(app: FastAPI) -> None:
    """Mount the assets; add /docs, its OAuth2 redirect and /redoc (none of them in the OpenAPI document)."""
    app.mount(STATIC_URL, StaticFiles(directory=ASSETS), name="static-offline-docs")
    openapi_url = app.openapi_url or "/openapi.json"
    redirect_url = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=_under_root(request, openapi_url),
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=redirect_url,
            swagger_js_url=_under_root(request, f"{STATIC_URL}/swagger-ui-bundle.js"),
            swagger_css_url=_under_root(request, f"{STATIC_URL}/swagger-ui.css"),
            swagger_favicon_url=_under_root(request, f"{STATIC_URL}/favicon.png"),
            swagger_ui_parameters=app.swagger_ui_parameters,
        )

    @app.get(redirect_url, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        return get_redoc_html(
            openapi_url=_under_root(request, openapi_url),
            title=f"{app.title} - ReDoc",
            redoc_js_url=_under_root(request, f"{STATIC_URL}/redoc.standalone.js"),
            redoc_favicon_url=_under_root(request, f"{STATIC_URL}/favicon.png"),
            with_google_fonts=False,
        )
