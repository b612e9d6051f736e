"""How many invented claims the evidence judge catches, against naive judges, in one run.

The reads are real: four VPCS daemons (Debian's ``vpcs``, the integration tests'
``VPCSProcess``) are given addresses and gateways through their consoles
(``console.run_commands``, as the copilot's tools do) and answer ``show ip``;
a Linux host is a network namespace of this run's own whose ``ip -o -4 addr``
and ``ip -4 route`` come from iproute2. Those outputs are the turn's reads
(``reads.DeviceRead`` stored as ``Evidence``, ids ``E1`` ...).

The conversations are scripted (seeded): each reads one to three of the five
devices and answers with sentences of four kinds:

* **supported**: a device that was read, its true value (address, gateway, MAC);
* **wrong value** (invented): a device that was read, another value than the read's;
* **unread device** (invented): a value stated about a device no tool read in the turn
  (half of them happen to be true: nothing in the turn shows it);
* **no claim**: a question, an instruction or a condition naming a device.

An invented sentence is *caught* when the judge flags it (contradicted or not
verified) and *missed* otherwise; a supported or no-claim sentence flagged is a
*false alarm*. The judges, on the same sentences:

* ``evidence``: ``claims_of`` + ``judge_all`` (what the copilot runs after an answer);
* ``flag nothing``: every answer trusted;
* ``flag every device name``: every sentence that names a device flagged;
* ``flag unread devices``: every sentence naming a device no tool read in the turn flagged.

Run: ``.venv/bin/python bench/evidence.py`` (``--conversations 200``, ``--seed 7``).
Needs ``vpcs`` and ``ip`` (iproute2), and root for the namespace, as the tests do.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))

from vpcs_process import VPCSProcess

from gns3server.agent.gns3_copilot.console import VPCS, AuditLog, Device, DeviceLocks, Who, load_policy, run_commands
from gns3server.agent.gns3_copilot.evidence import Evidence, claims_of, judge_all

PCS = {f"PC{i}": (f"10.0.{i}.{10 + i}", f"10.0.{i}.254") for i in range(1, 5)}
HOST = ("Host1", "10.1.0.1", "10.1.0.254")


@dataclass(frozen=True)
class Truth:
    """What a device really holds, as its read shows it."""

    device: str
    address: str
    gateway: str
    mac: str | None
    reads: tuple[tuple[str, str], ...]  # (command, output)


async def vpcs_truths(workdir: Path) -> list[Truth]:
    """Four real VPCS daemons given an address each, read with ``show ip``, then stopped."""
    daemons: list[VPCSProcess] = []
    truths: list[Truth] = []
    audit = AuditLog(workdir / "audit")
    try:
        for name, (address, gateway) in PCS.items():
            home = workdir / name
            home.mkdir()
            vpcs = await asyncio.to_thread(VPCSProcess.start, home)
            daemons.append(vpcs)
            device = Device(name, vpcs.host, vpcs.port, VPCS)
            common = {"policy": load_policy(), "locks": DeviceLocks(), "audit": audit, "who": Who("bench", "-", "-"),
                      "timeout": 30}
            configured = await run_commands(device, [f"ip {address}/24 {gateway}"], mode="config", **common)
            assert configured.status == "ok", configured
            shown = await run_commands(device, ["show ip"], mode="show", **common)
            assert shown.status == "ok", shown
            output = shown.results[0].output
            mac = next(line.split(":", 1)[1].strip() for line in output.splitlines() if line.startswith("MAC"))
            truths.append(Truth(name, address, gateway, mac, (("show ip", output),)))
    finally:
        await audit.close()
        for daemon in daemons:
            await asyncio.to_thread(daemon.stop)
    return truths


def host_truth() -> Truth:
    """A network namespace of this run's own with eth0 (a veth) holding Host1's address and default
    route, read by iproute2, then removed."""
    name, address, gateway = HOST
    namespace = f"bench-evidence-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", namespace], check=True, capture_output=True)
    try:
        for command in ("link add eth0 type veth peer name peer0", "link set eth0 up", "link set peer0 up",
                        f"addr add {address}/24 dev eth0", f"route add default via {gateway}"):
            subprocess.run(["ip", "-n", namespace, *command.split()], check=True, capture_output=True)
        reads = tuple(
            (command, subprocess.run(["ip", "-n", namespace, *command.split()[1:]], check=True, capture_output=True,
                                     text=True).stdout)
            for command in ("ip -o -4 addr show dev eth0", "ip -4 route show")
        )
    finally:
        subprocess.run(["ip", "netns", "del", namespace], check=True, capture_output=True)
    return Truth(name, address, gateway, None, reads)


# ------------------------------------------------------------------ conversations

SUPPORTED, WRONG, UNREAD, NO_CLAIM = "supported", "wrong value", "unread device", "no claim"
INVENTED = (WRONG, UNREAD)

_ADDRESS = ("{d} has the address {a}/24.", "{d}'s IP address is {a}.", "The address of {d} is {a}/24.",
            "{d} is configured with {a}/24.", "**{d}** answers on `{a}`.", "I read {a}/24 on {d}.",
            "Its address is {a}/24, as {d} shows.")
_GATEWAY = ("{d}'s gateway is {g}.", "{d} uses {g} as its default gateway.", "The default gateway of {d} is {g}.",
            "Traffic from {d} leaves via {g}.", "{g} is the next hop {d} uses.")
_MAC = ("{d}'s MAC address is {m}.", "The MAC of {d} is {m}.", "{d} (MAC {m}) is up.")
_NO_CLAIM = ("Shall I ping {d} next?", "Run `show ip` on {d} to check it yourself.", "If {d} is down, start it first.",
             "Let me know if {d} should get another address.", "Would you like me to read {d} too?")


@dataclass(frozen=True)
class Sentence:
    text: str
    kind: str
    device: str


def _other_ip(rng: random.Random, avoid: str) -> str:
    while True:
        value = f"10.{rng.choice((0, 1, 9))}.{rng.randint(0, 9)}.{rng.randint(1, 253)}"
        if value != avoid:
            return value


def _other_mac(rng: random.Random, avoid: str) -> str:
    while True:
        value = "00:50:79:66:68:" + f"{rng.randint(0, 255):02x}"
        if value != avoid:
            return value


def _statement(rng: random.Random, truth: Truth, true: bool) -> str:
    facts = ["address", "gateway"] + (["mac"] if truth.mac else [])
    fact = rng.choice(facts)
    if fact == "address":
        value = truth.address if true else _other_ip(rng, truth.address)
        return rng.choice(_ADDRESS).format(d=truth.device, a=value)
    if fact == "gateway":
        value = truth.gateway if true else _other_ip(rng, truth.gateway)
        return rng.choice(_GATEWAY).format(d=truth.device, g=value)
    assert truth.mac is not None
    value = truth.mac if true else _other_mac(rng, truth.mac)
    return rng.choice(_MAC).format(d=truth.device, m=value)


def conversation(rng: random.Random, truths: Sequence[Truth]) -> tuple[list[Truth], list[Sentence]]:
    """The devices one turn read, and its answer's sentences with what each really is."""
    read = rng.sample(list(truths), rng.randint(1, 3))
    unread = [t for t in truths if t not in read]
    said: list[Sentence] = []
    for _ in range(rng.randint(3, 5)):
        roll = rng.random()
        if roll < 0.35:
            truth = rng.choice(read)
            said.append(Sentence(_statement(rng, truth, True), SUPPORTED, truth.device))
        elif roll < 0.6:
            truth = rng.choice(read)
            said.append(Sentence(_statement(rng, truth, False), WRONG, truth.device))
        else:
            truth = rng.choice(unread)
            said.append(Sentence(_statement(rng, truth, rng.random() < 0.5), UNREAD, truth.device))
    for _ in range(rng.randint(1, 2)):
        truth = rng.choice(truths)
        said.append(Sentence(rng.choice(_NO_CLAIM).format(d=truth.device), NO_CLAIM, truth.device))
    rng.shuffle(said)
    return read, said


def evidence_of(read: Sequence[Truth]) -> list[Evidence]:
    records: list[Evidence] = []
    for truth in read:
        for command, output in truth.reads:
            records.append(Evidence(truth.device, command, output, "ok", "console", "gns3_show_commands",
                                    evidence_id=f"E{len(records) + 1}", session_id="bench", turn_id="turn",
                                    at=time.time()))
    return records


# ------------------------------------------------------------------ judges

Judge = Callable[[Sequence[Truth], Sequence[Sentence], Sequence[str]], set[int]]
"""The indexes of the sentences a judge flags."""


def evidence_judge(read: Sequence[Truth], said: Sequence[Sentence], names: Sequence[str]) -> set[int]:
    answer = " ".join(s.text for s in said)
    judged = judge_all(claims_of(answer, names, "m"), evidence_of(read))
    flagged_texts = [j.claim.text for j in judged if j.verdict != "verified"]
    return {i for i, s in enumerate(said) if any(s.text.replace("`", "") in t or t in s.text for t in flagged_texts)}


def flag_nothing(read: Sequence[Truth], said: Sequence[Sentence], names: Sequence[str]) -> set[int]:
    return set()


def flag_every_device(read: Sequence[Truth], said: Sequence[Sentence], names: Sequence[str]) -> set[int]:
    return {i for i, s in enumerate(said) if any(n in s.text for n in names)}


def flag_unread(read: Sequence[Truth], said: Sequence[Sentence], names: Sequence[str]) -> set[int]:
    seen = {t.device for t in read}
    return {i for i, s in enumerate(said) if any(n in s.text and n not in seen for n in names)}


JUDGES: dict[str, Judge] = {"evidence (claims_of + judge_all)": evidence_judge, "flag nothing": flag_nothing,
                            "flag every device name": flag_every_device, "flag unread devices": flag_unread}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-evidence-") as tmp:
        truths = asyncio.run(vpcs_truths(Path(tmp)))
    truths.append(host_truth())
    names = [t.device for t in truths]

    rng = random.Random(args.seed)
    runs = [conversation(rng, truths) for _ in range(args.conversations)]
    kinds = Counter(s.kind for _, said in runs for s in said)
    print(f"{args.conversations} conversations (seed {args.seed}), {sum(kinds.values())} sentences: "
          + ", ".join(f"{kinds[k]} {k}" for k in (SUPPORTED, WRONG, UNREAD, NO_CLAIM)))
    print(f"reads: real VPCS 'show ip' of {', '.join(PCS)}; iproute2 of {HOST[0]} in a namespace\n")
    invented = kinds[WRONG] + kinds[UNREAD]
    honest = kinds[SUPPORTED] + kinds[NO_CLAIM]
    print(f"| judge | caught (of {invented} invented) | missed | false alarms (of {honest}) "
          f"| wrong value caught | unread device caught | ms per answer |")
    print("|---|---|---|---|---|---|---|")
    for label, judge in JUDGES.items():
        caught: Counter[str] = Counter()
        alarms = 0
        started = time.perf_counter()
        for read, said in runs:
            flagged = judge(read, said, names)
            for index, sentence in enumerate(said):
                if sentence.kind in INVENTED and index in flagged:
                    caught[sentence.kind] += 1
                elif sentence.kind not in INVENTED and index in flagged:
                    alarms += 1
        per_answer = 1000 * (time.perf_counter() - started) / len(runs)
        total = caught[WRONG] + caught[UNREAD]
        print(f"| {label} | {total} ({100 * total / invented:.0f}%) | {invented - total} | {alarms} "
              f"| {caught[WRONG]}/{kinds[WRONG]} | {caught[UNREAD]}/{kinds[UNREAD]} | {per_answer:.2f} |")


if __name__ == "__main__":
    main()
