"""Checks that the client openapi-python-client generated from the served document parses every
JSON answer into its typed models. Arguments: the demo's base URL, client_id and client_secret.

First the calls of docs/api.md ("Python client"): a token, the groups sorted by label, the gateways
of a group page by page, downsampled data and a ping; then a group, a physical device, a data
session, the caller's account and a webhook by id; then every GET operation of the document
without path parameters whose 200 answer is application/json, found in the document and called
through the generated module named after its operationId, so that an operation added later is
checked too. An answer passes when it is a 200 (201 for a creation) parsed into the model of its
schema, and every value in it, down to each item, `_meta` and `_links`, is of the type the
generated model declares, with no field the schema lacks. One line is printed per operation; the
script exits non-zero with the reasons when an answer does not pass.
"""

import importlib
import inspect
import json
import pkgutil
import re
import sys
import time
import types
import typing
import urllib.request
from http import HTTPStatus
from typing import Any, get_args, get_origin, get_type_hints

import attrs
import httpx

import devicecloud_client.api
from devicecloud_client import AuthenticatedClient, Client, errors, models
from devicecloud_client.api.accounts import accounts_view_me
from devicecloud_client.api.authentication import authentication_token
from devicecloud_client.api.commands import commands_ping
from devicecloud_client.api.data import data_downsampled
from devicecloud_client.api.data_sessions import data_sessions_index, data_sessions_view
from devicecloud_client.api.groups import groups_index, groups_view
from devicecloud_client.api.physical_devices import physical_devices_index, physical_devices_view
from devicecloud_client.api.webhooks import webhooks_create, webhooks_view
from devicecloud_client.models import (
    DataSession,
    DataSessionCollection,
    DeviceAnswer,
    DownsampledPointCollection,
    Group,
    GroupCollection,
    NewToken,
    NewWebhook,
    NewWebhookFormatter,
    NewWebhookForwardingType,
    NoFieldsItem,
    PhysicalDevice,
    PhysicalDeviceCollection,
    TokenForm,
    User,
    Webhook,
)

# The receiver of the webhook created here, on loopback: .ci/python-client starts the demo with
# DEVICECLOUD_WEBHOOK_ALLOW_PRIVATE=1. The webhook is created inactive, so nothing is sent to it.
WEBHOOK_URL = "http://127.0.0.1:9/devicecloud-python-client"


class NotParsed(Exception):
    """An answer the generated client does not parse into the model of its schema."""


def mismatch(value: Any, hint: Any, where: str) -> str | None:
    """Where `value` is not of the type `hint` of the generated client, or None when it is."""
    origin, args = get_origin(hint), get_args(hint)
    wrong = f"{where} is {short(value)}, not {type_name(hint)}"
    if hint is Any:
        return None
    if origin in (typing.Union, types.UnionType):
        if type(value) in args and attrs.has(type(value)):
            return mismatch(value, type(value), where)
        return None if any(mismatch(value, option, where) is None for option in args) else wrong
    if origin is list:
        if not isinstance(value, list):
            return wrong
        if args == (NoFieldsItem,):
            return wrong  # NoFields, the record `fields` empties: no call here passes `fields`
        return first(mismatch(item, args[0], f"{where}[{i}]") for i, item in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            return wrong
        return first(mismatch(item, args[1], f"{where}[{key!r}]") for key, item in value.items())
    if attrs.has(hint):
        if not isinstance(value, hint):
            return wrong
        hints = get_type_hints(hint, localns=vars(models))
        if hints["additional_properties"] == dict[str, Any] and value.additional_properties:
            extra = ", ".join(
                f"{name}: {item!r:.200}" for name, item in value.additional_properties.items()
            )
            return f"{where} ({hint.__name__}) has fields its schema lacks: {extra}"
        return first(
            mismatch(getattr(value, field.name), hints[field.name], f"{where}.{field.name}")
            for field in attrs.fields(hint)
        )
    if hint in (int, float) and isinstance(value, bool):
        return wrong
    if hint is float:
        return None if isinstance(value, (int, float)) else wrong
    return None if isinstance(value, hint) else wrong


def short(value: Any) -> str:
    """`value` in a few words, for the reports."""
    if attrs.has(type(value)):
        return f"a {type(value).__name__}"
    text = f"a list of {len(value)}" if isinstance(value, list) and value else repr(value)
    return text if len(text) <= 120 else f"{text[:117]}..."


def type_name(hint: Any) -> str:
    """`hint` without the modules of its classes: `int | None | Unset`."""
    if isinstance(hint, type) and not get_args(hint):
        return hint.__name__
    return re.sub(r"\b(?:\w+\.)+(\w+)", r"\1", str(hint))


def first(found):
    """The first of `found` that is not None, or None."""
    return next((item for item in found if item is not None), None)


class Checker:
    """Calls operations of the generated client and checks their parsed answers."""

    def __init__(self, base: str, token: str):
        self.base, self.token = base, token
        self.last: httpx.Response | None = None
        self.failures: list[str] = []
        self.checked: set[str] = set()
        self.api = self.client()

    def client(self, params: dict[str, str] | None = None) -> AuthenticatedClient:
        """A client that raises on an undocumented status and keeps its latest answer for the
        reports; `params` go with every request."""
        return AuthenticatedClient(
            base_url=self.base,
            token=self.token,
            raise_on_unexpected_status=True,
            httpx_args={"params": params or {}, "event_hooks": {"response": [self.keep]}},
        )

    def keep(self, response: httpx.Response) -> None:
        response.read()
        self.last = response

    def typed(self, operation: str, model: type, call, detail: str = "") -> Any:
        """The answer of `call()` (the operation's generated `sync_detailed`) parsed into `model`;
        prints a line. Raises NotParsed when it is not; a value of another type than its model
        declares is a failure too, kept for the end, but the answer is returned."""
        self.checked.add(operation)
        operation = f"{operation} {detail}".strip()
        try:
            answer = call()
        except errors.UnexpectedStatus as error:
            status, content = f"undocumented status {error.status_code}", error.content
            raise NotParsed(f"{operation}: {status}: {content[:500]!r}") from None
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            content = self.last.content
            raise NotParsed(
                f"{operation}: the client fails ({error!r}) on {content[:500]!r}"
            ) from None
        status = answer.status_code.value
        if status not in (200, 201) or not isinstance(answer.parsed, model):
            content = answer.content
            raise NotParsed(f"{operation}: {status}, not a {model.__name__}: {content[:500]!r}")
        problem = mismatch(answer.parsed, model, operation)
        if problem:
            self.failures.append(problem)
        items = getattr(answer.parsed, "items", None)
        count = f" with {len(items)} items" if isinstance(items, list) else ""
        print(f"{operation}: {status} {model.__name__}{count}{' FAILS' if problem else ''}")
        return answer.parsed


def main(base: str, client_id: str, client_secret: str) -> None:
    # A token: the password grant.
    form = TokenForm(
        grant_type="password",
        client_id=client_id,
        client_secret=client_secret,
        username="admin@devicecloud.demo",
        password="demo-password",
    )
    token = authentication_token.sync(client=Client(base_url=base), body=form)
    assert isinstance(token, NewToken), token
    checker = Checker(base, token.access_token)
    try:
        check(checker)
    except NotParsed as failure:
        checker.failures.append(f"{failure}\n(the checks after it need its answer and did not run)")
    if checker.failures:
        sys.exit(
            "The generated client does not parse these answers:\n" + "\n".join(checker.failures)
        )


def check(checker: Checker) -> None:
    """The calls of docs/api.md, records by id, then every other GET without path parameters."""
    api = checker.api

    # The groups, sorted by label.
    groups = checker.typed(
        "groups_index",
        GroupCollection,
        lambda: groups_index.sync_detailed(client=api, sort="label"),
    ).items
    group = next(g for g in groups if g.label == "Rotterdam water plant")
    print(f"{len(groups)} groups; {group.label} is {group.id_group}")

    # The gateways (devices without a parent) of that group, five a page. The operation declares no
    # `filter` parameter, so the filter goes with every request of a client of its own.
    filtered = checker.client({"filter[id_group]": group.id_group, "filter[id_parent]": "NULL"})
    gateways, page = [], 1
    while True:
        body = checker.typed(
            "physical_devices_index",
            PhysicalDeviceCollection,
            lambda page=page: physical_devices_index.sync_detailed(
                client=filtered, page=page, per_page=5, sort="serial_hardware"
            ),
            f"page {page}",
        )
        gateways += body.items
        if body.field_meta.current_page >= body.field_meta.page_count:
            break
        page += 1
    assert len(gateways) > 5 and page > 1, (len(gateways), page)
    assert all(g.id_group == group.id_group and g.id_parent is None for g in gateways)
    print(f"{len(gateways)} gateways in {page} pages")

    # Downsampled data of the group.
    points = checker.typed(
        "data_downsampled",
        DownsampledPointCollection,
        lambda: data_downsampled.sync_detailed(client=api, filterid_group=group.id_group),
    ).items
    assert points, "no downsampled data"
    print(f"{len(points)} downsampled points, first {points[0].to_dict()}")

    # A ping to a simulated CORE gateway, once it is connected (404 until then).
    core = next(g for g in gateways if g.serial_hardware.startswith("DEMO-CORE-"))

    def ping():
        deadline = time.monotonic() + 30
        while True:
            answer = commands_ping.sync_detailed(core.id_physical_device, client=api)
            if answer.status_code == HTTPStatus.OK or time.monotonic() > deadline:
                return answer
            time.sleep(1)

    pong = checker.typed("commands_ping", DeviceAnswer, ping)
    print(f"ping {core.serial_hardware}: {pong.to_dict()}")

    # Records by id.
    checker.typed(
        "groups_view", Group, lambda: groups_view.sync_detailed(group.id_group, client=api)
    )
    checker.typed(
        "physical_devices_view",
        PhysicalDevice,
        lambda: physical_devices_view.sync_detailed(core.id_physical_device, client=api),
    )
    sessions = checker.typed(
        "data_sessions_index",
        DataSessionCollection,
        lambda: data_sessions_index.sync_detailed(client=api),
    ).items
    assert sessions, "no data session"
    checker.typed(
        "data_sessions_view",
        DataSession,
        lambda: data_sessions_view.sync_detailed(sessions[0].id_data_session, client=api),
    )
    checker.typed("accounts_view_me", User, lambda: accounts_view_me.sync_detailed(client=api))

    # A webhook, created inactive, then by id.
    new = NewWebhook(
        id_group=group.id_group,
        label="python client check",
        forwarding_type=NewWebhookForwardingType.EVENTS,
        formatter=NewWebhookFormatter.JSON,
        url=WEBHOOK_URL,
        is_active=False,
    )
    webhook = checker.typed("webhooks_create", Webhook, lambda: webhooks_create.sync_detailed(client=api, body=new))
    checker.typed(
        "webhooks_view",
        Webhook,
        lambda: webhooks_view.sync_detailed(webhook.id_webhook, client=api),
    )

    # Every other GET operation without path parameters that answers JSON, from the document.
    for operation, model, call in json_gets(checker.base, api, {"filterid_group": group.id_group}):
        if operation in checker.checked:
            print(f"{operation}: checked above")
            continue
        try:
            checker.typed(operation, model, call)
        except NotParsed as failure:
            print(f"{operation}: FAILS")
            checker.failures.append(str(failure))


def json_gets(base: str, api: AuthenticatedClient, values: dict[str, Any]):
    """(operationId, model of the 200 answer, call) of every GET operation of the served document
    without path parameters whose 200 answer is application/json; required arguments of the
    generated function are taken from `values`, by name. Prints a line for each GET skipped."""
    with urllib.request.urlopen(f"{base}/api/v2/openapi.json") as answer:
        document = json.load(answer)
    package = devicecloud_client.api
    modules = {
        name.rpartition(".")[2]: name
        for _, name, is_package in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")
        if not is_package
    }
    for path, item in document["paths"].items():
        get = item.get("get")
        if get is None:
            continue
        operation = get["operationId"]
        parameters = item.get("parameters", []) + get.get("parameters", [])
        if any(parameter["in"] == "path" for parameter in parameters):
            continue
        content = get["responses"].get("200", {}).get("content", {})
        if "application/json" not in content:
            print(
                f"{operation}: skipped, its 200 answer is {', '.join(content) or 'not described'}"
            )
            continue
        schema = content["application/json"]["schema"]
        names = [ref["$ref"].rpartition("/")[2] for ref in schema.get("anyOf", [schema])]
        model = getattr(models, next(name for name in names if name != "NoFields"))
        function = importlib.import_module(modules[operation]).sync_detailed
        required = [
            name
            for name, parameter in inspect.signature(function).parameters.items()
            if name != "client" and parameter.default is inspect.Parameter.empty
        ]
        missing = [name for name in required if name not in values]
        if missing:
            sys.exit(
                f"{operation} ({path}): json_gets has no value for its required arguments {missing}"
            )
        arguments = {name: values[name] for name in required}
        yield (
            operation,
            model,
            lambda function=function, arguments=arguments: function(client=api, **arguments),
        )


if __name__ == "__main__":
    main(*sys.argv[1:4])
