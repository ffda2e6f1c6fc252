"""Long queries (issue 46, R2): one key sending many long /v1/context queries at once, each encoded by both
embedding models, used to take every core and the pool (another tenant's context: 24 s at the median). Now
a query is at most QUERY_MAX characters (422 naming `query` past it, before any encoding), a context is a
scan (a fair turn of its key, then its work within STRATAFLOW_API_SCAN_MAX_S), and the other namespace's
context keeps answering."""

from __future__ import annotations

import random
import threading
import time

from strataflow.service.schemas import QUERY_MAX
from tests.fixtures.service import Tenant

WORDS = (
    "the client wants to know about her visa application 她的签证申请 and the schedule of the meeting with "
    "the lawyer 合同 发票 travel plans the office move 预算 her family doctor weekend flights insurance"
).split()


def _query(rng: random.Random, length: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(length))[:length]


def test_long_queries_of_one_key_leave_another_namespace_answering(
    api_url: str, tenants: dict[str, Tenant]
) -> None:
    attacker, victim = tenants["alpha"], tenants["beta"]
    done = threading.Event()
    answers: list[tuple[int, float, int]] = []
    probes: list[tuple[int, float]] = []

    def attack(seed: int) -> None:
        rng = random.Random(seed)
        with attacker.client(api_url) as client:
            for turn in range(1000):
                if done.is_set():
                    return
                length = 3_990 if turn % 2 else QUERY_MAX  # over the bound, then the longest allowed
                query = f"{rng.randrange(10**9)} {_query(rng, length)}"[:length]
                started = time.monotonic()
                if turn % 4 < 2:
                    answer = client.get("/v1/context", params={"subject": "att_u", "query": query})
                else:
                    answer = client.post("/v1/context", json={"subject": "att_u", "query": query})
                answers.append((answer.status_code, time.monotonic() - started, length))
                if length > QUERY_MAX:
                    assert answer.status_code == 422 and answer.json()["error"]["field"] == "query", (
                        answer.text
                    )

    threads = [threading.Thread(target=attack, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    with victim.client(api_url) as client:
        while len(probes) < 10:
            started = time.monotonic()
            code = client.get(
                "/v1/context", params={"subject": "v_u", "query": f"where does she work {len(probes)}"}
            )
            probes.append((code.status_code, time.monotonic() - started))
            time.sleep(0.5)
    done.set()
    for thread in threads:
        thread.join(60)
    assert all(code == 200 and took < 5.0 for code, took in probes), probes
    long_ones = [(code, round(took, 1)) for code, took, length in answers if length == QUERY_MAX]
    assert long_ones and all(code in (200, 422, 429) and took < 12.0 for code, took in long_ones), long_ones
    refused = [took for code, took, length in answers if length > QUERY_MAX]
    assert refused and max(refused) < 12.0, refused
