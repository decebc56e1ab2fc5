#!/usr/bin/env python3
"""Writes users-4k.jsonl: 64 JSON documents of at most 4096 bytes, one per
line, each a page of user records as a REST or WebSocket API returns them
(ids, names, e-mail addresses, dates, places, roles, counters, a short bio).

The records come from a seeded generator, so the file is the same on every
run; no two documents share their records, so a compressor that keeps its
context between messages gains only from the repeated keys and vocabulary,
as it would on a real feed. `celer bench --message-file` sends the lines in
turn (bench/run ws, load `deflate`).

    python3 bench/messages/make-users.py > bench/messages/users-4k.jsonl
"""

import json
import random
import sys

LIMIT = 4096
DOCUMENTS = 64

FIRST = ["Ada", "Alan", "Amara", "Anders", "Aiko", "Bjorn", "Carmen", "Chen", "Dara", "Diego", "Elif", "Emeka",
         "Farah", "Freya", "Giulia", "Hana", "Hugo", "Ines", "Ivan", "Jamal", "Jun", "Kai", "Kavya", "Lars", "Leila",
         "Lucia", "Mateo", "Mei", "Nadia", "Nikolai", "Noor", "Olga", "Omar", "Priya", "Rafael", "Rin", "Sana",
         "Soren", "Tariq", "Thandiwe", "Uma", "Victor", "Wen", "Yara", "Yusuf", "Zofia", "Zoë", "Émile", "Łukasz"]
LAST = ["Abara", "Andersson", "Bauer", "Bianchi", "Chowdhury", "Costa", "Dubois", "Eriksen", "Fernández", "Fischer",
        "García", "Haddad", "Hoang", "Ivanova", "Jensen", "Kato", "Kowalski", "Kumar", "Larsen", "Lindqvist", "Mensah",
        "Müller", "Nakamura", "Novak", "Okafor", "Olsen", "Petrova", "Quispe", "Rossi", "Sato", "Schmidt", "Silva",
        "Takahashi", "Tanaka", "Varga", "Wang", "Weber", "Yilmaz", "Zhang", "Żak"]
PLACES = [("GB", "London"), ("FR", "Lyon"), ("DE", "Leipzig"), ("JP", "Osaka"), ("BR", "Recife"), ("IN", "Pune"),
          ("NG", "Lagos"), ("PL", "Kraków"), ("SE", "Göteborg"), ("US", "Portland"), ("CA", "Montréal"),
          ("KE", "Nairobi"), ("AR", "Córdoba"), ("TR", "İzmir"), ("VN", "Đà Nẵng"), ("EG", "Alexandria"),
          ("NO", "Tromsø"), ("MX", "Oaxaca"), ("KR", "Busan"), ("ZA", "Durban")]
DOMAINS = ["example.com", "mail.example.org", "example.net", "corp.example", "uni.example.edu"]
ROLES = ["admin", "editor", "viewer", "billing", "support", "developer", "auditor"]
PLANS = ["free", "team", "business", "enterprise"]
WORDS = ("coffee climbing photography open source rust databases gardening jazz cycling chess poetry robotics "
         "astronomy baking sailing typography linguistics maps birds synths kernels compilers ceramics running "
         "film tea origami marathons caching distributed systems accessibility security music").split()


def user(rng, uid):
    first, last = rng.choice(FIRST), rng.choice(LAST)
    country, city = rng.choice(PLACES)
    handle = f"{first}.{last}".lower().encode("ascii", "ignore").decode() or f"user{uid}"
    created = f"20{rng.randint(15, 25):02d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T" \
              f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"
    seen = f"2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:" \
           f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z"
    return {
        "id": uid,
        "uuid": "%08x-%04x-4%03x-%04x-%012x" % (rng.getrandbits(32), rng.getrandbits(16), rng.getrandbits(12),
                                                  0x8000 | rng.getrandbits(14), rng.getrandbits(48)),
        "username": f"{handle}{rng.randint(1, 999)}",
        "name": f"{first} {last}",
        "email": f"{handle}@{rng.choice(DOMAINS)}",
        "verified": rng.random() < 0.8,
        "roles": sorted(rng.sample(ROLES, rng.randint(1, 3))),
        "plan": rng.choice(PLANS),
        "location": {"country": country, "city": city},
        "created_at": created,
        "last_seen_at": seen,
        "followers": int(rng.paretovariate(1.2) * 10),
        "score": round(rng.uniform(0, 100), 2),
        "bio": " ".join(rng.sample(WORDS, rng.randint(3, 8))).capitalize() + ".",
    }


def main():
    rng = random.Random(14)
    uid = 100_000
    out = []
    for page in range(1, DOCUMENTS + 1):
        users = []
        while True:
            uid += rng.randint(1, 97)
            candidate = users + [user(rng, uid)]
            doc = {"page": page, "per_page": len(candidate), "next": f"/api/users?page={page + 1}",
                   "users": candidate}
            if len(json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()) > LIMIT:
                break
            users = candidate
        doc = {"page": page, "per_page": len(users), "next": f"/api/users?page={page + 1}", "users": users}
        out.append(json.dumps(doc, ensure_ascii=False, separators=(",", ":")))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
