"""The calls of docs/api.md ("Python client"), with the client openapi-python-client generated
from the served document: a token, the groups, the gateways of a group page by page, downsampled
data and a ping. Arguments: the demo's base URL, client_id and client_secret."""

import json
import sys
import time

from devicecloud_client import AuthenticatedClient, Client
from devicecloud_client.api.authentication import authentication_token
from devicecloud_client.api.commands import commands_ping
from devicecloud_client.api.data import data_downsampled
from devicecloud_client.api.groups import groups_index
from devicecloud_client.api.physical_devices import physical_devices_index
from devicecloud_client.models import NewToken, TokenForm

base, client_id, client_secret = sys.argv[1:4]

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
api = AuthenticatedClient(base_url=base, token=token.access_token, raise_on_unexpected_status=True)

# The groups, sorted by label.
answer = groups_index.sync_detailed(client=api, sort="label")
assert answer.status_code == 200, answer
groups = json.loads(answer.content)["items"]
group = next(g for g in groups if g["label"] == "Rotterdam water plant")
print(f"{len(groups)} groups; {group['label']} is {group['id_group']}")

# The gateways (devices without a parent) of that group, five a page. The operation declares no
# `filter` parameter, so the filter goes with every request of a client of its own.
filtered = AuthenticatedClient(
    base_url=base,
    token=token.access_token,
    raise_on_unexpected_status=True,
    httpx_args={"params": {"filter[id_group]": group["id_group"], "filter[id_parent]": "NULL"}},
)
gateways, page = [], 1
while True:
    answer = physical_devices_index.sync_detailed(client=filtered, page=page, per_page=5, sort="serial_hardware")
    assert answer.status_code == 200, answer
    body = json.loads(answer.content)
    gateways += body["items"]
    if body["_meta"]["currentPage"] >= body["_meta"]["pageCount"]:
        break
    page += 1
assert len(gateways) > 5 and page > 1, (len(gateways), page)
assert all(g["id_group"] == group["id_group"] and g["id_parent"] is None for g in gateways)
print(f"{len(gateways)} gateways in {page} pages")

# Downsampled data of the group.
answer = data_downsampled.sync_detailed(client=api, filterid_group=group["id_group"])
assert answer.status_code == 200, answer
points = json.loads(answer.content)["items"]
assert points, "no downsampled data"
print(f"{len(points)} downsampled points, first {points[0]}")

# A ping to a simulated CORE gateway, once it is connected.
core = next(g for g in gateways if g["serial_hardware"].startswith("DEMO-CORE-"))
deadline = time.monotonic() + 30
while True:
    answer = commands_ping.sync_detailed(core["id_physical_device"], client=api)
    if answer.status_code == 200 or time.monotonic() > deadline:
        break
    time.sleep(1)
assert answer.status_code == 200, answer
print(f"ping {core['serial_hardware']}: {json.loads(answer.content)}")
