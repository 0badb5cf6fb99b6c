"""The allowances through the host-address block, and the lines that set the block up."""

from __future__ import annotations

import ipaddress

import pytest

from posttrainbench.host.agent_check.address import sandbox_allowance
from posttrainbench.host.envs.host_addresses import (
    BLOCK_TABLE,
    HOST_ALLOW_ENV,
    HostAddressError,
    HostEndpoint,
    block_batches,
    format_allowance,
    host_networks,
    parse_allowances,
)
from tests.security.host_canaries import outside_address


def test_allowances_round_trip_both_families() -> None:
    value = ",".join([format_allowance("192.0.2.2", 8080), format_allowance("fd00::2", 443)])
    assert value == "192.0.2.2:8080,[fd00::2]:443"
    assert parse_allowances(value) == [
        HostEndpoint(ipaddress.ip_address("192.0.2.2"), 8080),
        HostEndpoint(ipaddress.ip_address("fd00::2"), 443),
    ]
    assert sandbox_allowance("http://192.0.2.2:8080") == {HOST_ALLOW_ENV: "192.0.2.2:8080"}


@pytest.mark.parametrize("bad", ["192.0.2.2", "host:80", "192.0.2.2:0", "192.0.2.2:70000"])
def test_a_malformed_allowance_is_one_clear_line(bad: str) -> None:
    with pytest.raises(HostAddressError, match=f"{HOST_ALLOW_ENV}: '{bad}' is not ADDRESS:PORT"):
        parse_allowances(bad)


def test_the_block_covers_each_address_and_the_rule_comes_first_time_only() -> None:
    networks = {ipaddress.ip_network("192.0.2.2/32"), ipaddress.ip_network("fd00::2/128")}
    allow = parse_allowances("192.0.2.2:8080")
    first = block_batches(networks, allow, first=True)
    assert first[4] == [
        f"route replace prohibit 192.0.2.2/32 table {BLOCK_TABLE}",
        "rule add pref 100 to 192.0.2.2/32 ipproto tcp dport 8080 lookup main",
        f"rule add pref 200 lookup {BLOCK_TABLE}",
    ]
    later = block_batches(networks, [], first=False)
    assert later[4] == [f"route replace prohibit 192.0.2.2/32 table {BLOCK_TABLE}"]


def test_this_hosts_addresses_are_read_without_loopback() -> None:
    networks = host_networks()
    assert not any(n.is_loopback for n in networks)
    outside = outside_address()
    if outside is not None:
        assert ipaddress.ip_network(outside) in networks
