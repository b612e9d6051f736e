"""The link tool: suspend or resume a link, or set its packet filters (loss, delay ...).

GNS3 3.0 changes both with ``PUT /v3/projects/{p}/links/{l}`` (``suspend``,
``filters``), which needs ``Link.Modify``; the tool calls it with the user's
token, so GNS3 decides, like the node tools. The controller keeps the state
whether or not the nodes run (a suspended link is a "drop everything" filter on
the wire once they do). The filters given replace the link's filters, as in
GNS3's own dialog; GNS3 drops a filter whose first value is 0.

Every change reads the link first and returns what it was (``before``) and the
call that puts it back (``undo``), which fault injection records so that the
injector can revert it. Changes and GNS3's refusals are audited.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from ..as_data import as_data
from ..console.audit import Who
from ..gns3_client import GNS3Client, GNS3Error
from ..gns3_client.topology import find_port, link_text, resolve_endpoint
from .errors import ToolError
from .nodes import PermissionErrors, ProjectTool, _by_name

log = logging.getLogger(__name__)

UPDATE_LINK = "gns3_update_link"

# GNS3's filters (controller/link.py FILTERS): the parameters each takes and their ranges.
FILTERS: dict[str, tuple[tuple[int, int], ...] | None] = {
    "packet_loss": ((0, 100),),
    "delay": ((0, 32767), (0, 32767)),
    "corrupt": ((0, 100),),
    "frequency_drop": ((-1, 32767),),
    "bpf": None,  # one text: BPF expressions, one per line
}
BPF_MAX = 2000


def check_filters(filters: Mapping[str, Sequence[Any]]) -> dict[str, list[Any]]:
    """GNS3's ``filters`` body from the model's: known filters, parameters in range (ValueError naming the
    filter otherwise); a delay without jitter gets jitter 0."""
    checked: dict[str, list[Any]] = {}
    for name, values in filters.items():
        if name not in FILTERS:
            raise ValueError(f"unknown filter {name!r} (filters: {', '.join(FILTERS)})")
        ranges = FILTERS[name]
        if ranges is None:
            if len(values) != 1 or not isinstance(values[0], str) or len(values[0]) > BPF_MAX:
                raise ValueError(f"{name} takes one text of at most {BPF_MAX} characters")
            checked[name] = [values[0]]
            continue
        wanted = list(values) + [0] * (len(ranges) - len(values)) if name == "delay" else list(values)
        if len(wanted) != len(ranges) or not all(type(v) is int for v in wanted):
            raise ValueError(f"{name} takes {len(ranges)} integer(s)")
        for value, (low, high) in zip(wanted, ranges):
            if not low <= value <= high:
                raise ValueError(f"{name}: {value} is out of range ({low} to {high})")
        checked[name] = wanted
    return checked


class UpdateLinkInput(BaseModel):
    node_a: str | None = Field(None, description="One end's node name (with node_b).")
    node_b: str | None = Field(None, description="The other end's node name.")
    port_a: str | None = Field(None, description="node_a's port (e.g. e0), if the nodes share several links.")
    link_id: str | None = Field(None, description="Instead of node names.")
    suspend: bool | None = Field(None, description="true: suspend (no packet passes); false: resume.")
    filters: dict[str, list[int | str]] | None = Field(
        None, description='Replace the link\'s filters ({} removes them): {"packet_loss": [%], "delay": [ms, '
        'jitter ms], "corrupt": [%], "frequency_drop": [N, -1 = all], "bpf": ["expressions"]}.',
    )

    @field_validator("filters")
    @classmethod
    def _known_filters(cls, filters: dict[str, list[int | str]] | None) -> dict[str, list[Any]] | None:
        return None if filters is None else check_filters(filters)

    @model_validator(mode="after")
    def _something_to_do(self) -> UpdateLinkInput:
        if self.suspend is None and self.filters is None:
            raise ValueError("give suspend, filters or both")
        if self.link_id is None and (not self.node_a or not self.node_b):
            raise ValueError("name the link by node_a and node_b, or by link_id")
        return self


def _port_names(node: Mapping[str, Any], end: Mapping[str, Any]) -> set[str]:
    """The names a user may give the port of a link's end (folded): the one the link's text shows
    (``e0``, or ``a1/p0`` for a port the node does not list), the port's own names, GNS3's label."""
    shown = resolve_endpoint(end, {node.get("node_id"): node}).port_text
    names = {shown, str((end.get("label") or {}).get("text") or "")}
    port = find_port(node, end)
    if port is not None:
        names |= {str(port.get("name") or ""), str(port.get("short_name") or "")}
    return {n.casefold() for n in names if n}


def _find_link(
    links: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]], node_a: str, node_b: str, port_a: str | None
) -> Mapping[str, Any]:
    """The one link between two named nodes (on ``port_a`` of node_a when given)."""
    a, b = _by_name(nodes, node_a, "node"), _by_name(nodes, node_b, "node")
    between = [
        link for link in links
        if sorted(str(e.get("node_id")) for e in link.get("nodes") or []) == sorted([str(a["node_id"]), str(b["node_id"])])
    ]
    if port_a is not None:
        wanted = port_a.casefold()
        between = [
            link for link in between
            if any(e.get("node_id") == a["node_id"] and wanted in _port_names(a, e) for e in link.get("nodes") or [])
        ]
    if len(between) == 1:
        return between[0]
    if not between:
        ends = f"{as_data(a['name'])} and {as_data(b['name'])}"
        raise ToolError(f"no link between {ends}" + (f" on {as_data(a['name'])} {as_data(port_a)}" if port_a else ""))
    by_id = {n.get("node_id"): n for n in nodes}
    names = "; ".join(link_text(link, by_id) for link in between)
    raise ToolError(f"{as_data(a['name'])} and {as_data(b['name'])} share several links ({names}); say which with port_a")


def _state(link: Mapping[str, Any]) -> dict[str, Any]:
    return {"suspend": bool(link.get("suspend")), "filters": dict(link.get("filters") or {})}


def _change_text(suspend: bool | None, filters: Mapping[str, Any] | None) -> str:
    parts = [] if suspend is None else ["suspend" if suspend else "resume"]
    if filters is not None:
        shown = ", ".join(f"{k}={'/'.join(map(as_data, v))}" for k, v in sorted(filters.items())) or "none"
        parts.append(f"filters {shown}")
    return "; ".join(parts)


class UpdateLinkTool(ProjectTool):
    name: str = UPDATE_LINK
    description: str = (
        "Suspend or resume a link of the open project, or set its packet filters (loss, delay, corruption ...), "
        "by its two node names. Returns the link's state before and after."
    )
    args_schema: type[BaseModel] = UpdateLinkInput

    async def _arun(
        self, node_a: str | None = None, node_b: str | None = None, port_a: str | None = None,
        link_id: str | None = None, suspend: bool | None = None, filters: Mapping[str, Sequence[Any]] | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        wanted = None if filters is None else check_filters(filters)
        change = _change_text(suspend, wanted)
        try:
            async with self.client_factory() as client:
                link, name = await self._link(client, node_a, node_b, port_a, link_id, change)
                before = _state(link)
                if wanted and not await client.link_filters(self.project_id, str(link["link_id"])):
                    raise ToolError(
                        f"GNS3 cannot filter {name}: neither node type supports filters (suspending works on any link)"
                    )
                body: dict[str, Any] = {}
                if suspend is not None:
                    body["suspend"] = suspend
                if wanted is not None:
                    body["filters"] = wanted
                try:
                    updated = await client.update_link(self.project_id, str(link["link_id"]), **body)
                except PermissionErrors as exc:
                    raise await self._refused(exc, f"link {name}", change) from exc
        except GNS3Error as exc:
            if isinstance(exc, PermissionErrors):
                raise await self._refused(exc, "this project's links", change) from exc
            raise ToolError(f"GNS3 refused {change} on the link: {getattr(exc, 'message', exc)}") from exc
        after = _state(updated) if "suspend" in updated else _state({**link, **body})
        if self.audit is not None:
            await self.audit.record(Who(self.user, self.session_id, self.project_id), f"link {name}", change, "ok")
        log.info("Link %s of project %s changed by %s: %s", name, self.project_id, self.user or "?", change)
        # Only what this call changed, so that faults on one link revert independently of each other.
        undo: dict[str, Any] = {"link_id": str(link["link_id"])}
        undo.update({key: before[key] for key in body})
        return {"link": name, "link_id": link["link_id"], "before": before, "after": after,
                "undo": {"tool": UPDATE_LINK, "args": undo}}

    async def _link(
        self, client: GNS3Client, node_a: str | None, node_b: str | None, port_a: str | None, link_id: str | None,
        change: str,
    ) -> tuple[Mapping[str, Any], str]:
        """The link named by id or by its ends, and how the user names it."""
        try:
            nodes, links = await client.nodes_and_links(self.project_id)
        except PermissionErrors as exc:
            raise await self._refused(exc, "this project's links", change) from exc
        link: Mapping[str, Any]
        if link_id is not None:
            found = next((x for x in links if str(x.get("link_id")) == link_id), None)
            if found is None:
                raise ToolError(f"no link {link_id!r} in this project")
            link = found
        else:
            assert node_a is not None and node_b is not None  # the input's validator
            link = _find_link(links, nodes, node_a, node_b, port_a)
        return link, link_text(link, {n.get("node_id"): n for n in nodes})
