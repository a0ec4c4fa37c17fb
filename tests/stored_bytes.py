"""Bytes as this package kept them in Redis before its one codec (core/codec.py), written by
that code: claim-check records, store entries and dead letters, plain and compressed. Every
reader must keep reading them (tests/core/test_codec.py and the tests of each reader)."""

from __future__ import annotations

from crawler_tasks.core.models import PageRecord

AT = "2026-11-22T08:00:00+00:00"
#: A small record (its JSON stays plain) and a large one (compressed).
SMALL = PageRecord(url="http://site.test/a", fingerprint="f" * 40, crawl_id="c1", depth=0,
                   fetched_at=AT, status=200, body="h\u00e9llo")
LARGE = PageRecord(url="http://site.test/b", fingerprint="e" * 40, crawl_id="c1", depth=1,
                   fetched_at=AT, status=200, body="ab" * 3000)
STORE = "sqlite:///x.db"
#: Record fields added since these bytes were written (a reader fills in their defaults).
NEWER_FIELDS = ("items", "item_types", "rule", "rendered", "dom", "signature", "changed", "previous_fetched_at",
                "changed_at", "near_duplicate_of", "duplicate_of")


def as_written(record: PageRecord) -> dict:
    """``record`` as a dict, without the fields the code that wrote these bytes did not have."""
    return {k: v for k, v in record.to_dict().items() if k not in NEWER_FIELDS}

#: Claims.put: the ``record`` field of a page claim (JSON with ASCII escapes), SMALL and LARGE.
CLAIM_PLAIN = (
    b'{"url": "http://site.test/a", "fingerprint": "ffffffffffffffffffffffffffffffffff'
    b'ffffff", "crawl_id": "c1", "depth": 0, "fetched_at": "2026-11-22T08:00:00+00:00"'
    b', "status": 200, "headers": {}, "content_type": null, "title": null, "text": nul'
    b'l, "links": [], "description": null, "redirect_to": null, "method": "GET", "size'
    b'": 0, "truncated": false, "encoding": null, "meta": {}, "body": "h\\u00e9llo", "s'
    b'tatus_line": null, "raw_headers": null, "request": null, "body_base64": null, "p'
    b'ayload_digest": null, "proxy": null}')
CLAIM_ZLIB = bytes.fromhex(
    "785eed99cd6ac3300cc75fa5e4ba7575c22823f7b117e86d0ce3d86a63e6d99eadb066a5ef3e2b74b8bd0d765512"
    "0c92f595df51ff533325d7f4ab66448cfd66932dc20342c6cdd0dcaf9abdf5074831598f14047f7c285527f5e5a4"
    "3594a75bf218883816b3a5c2807a0423d552b713dd76ddb6ebaedb89a75e88f2dd2d27a5655438e512d60951cc11"
    "948144f6e94c6d8247f028718e507c7e72ae78d1a2bb36e1487d2e97cefa77ca7f7d5b86ca3ad98836f81a91c0d8"
    "04ba540dd5f9013886e5775e9e77cb60f69b7ad0509826af15025def95cb507ce0753085df4d05f53bf710cc4cb5"
    "d4c02f1360024c8009300126c00498001360024c8009300126c00498001360024c8009300126f05f025551904507"
    "b8d2088a5c21abb670910a127c4e450ca92b7c5adbcb4165d83e566754b30bca48630f37c13185232df9a9d8f907"
    "43dd8e2f")

#: StoreEntry.encode: StoreEntry("t1.write", "c1", STORE, SMALL, 2) plain, then with its body as
#: the text tail of a large record; StoreEntry("t2.write", "c1", STORE, LARGE, 1) compressed.
ENTRY_PLAIN = (
    b'{"t": "t1.write", "c": "c1", "s": "sqlite:///x.db", "a": 2, "r": {"url": "http:/'
    b'/site.test/a", "fingerprint": "ffffffffffffffffffffffffffffffffffffffff", "crawl'
    b'_id": "c1", "depth": 0, "fetched_at": "2026-11-22T08:00:00+00:00", "status": 200'
    b', "headers": {}, "content_type": null, "title": null, "text": null, "links": [],'
    b' "description": null, "redirect_to": null, "method": "GET", "size": 0, "truncate'
    b'd": false, "encoding": null, "meta": {}, "body": "h\xc3\xa9llo", "status_line": null, '
    b'"raw_headers": null, "request": null, "body_base64": null, "payload_digest": nul'
    b'l, "proxy": null}}')
ENTRY_TAIL = bytes.fromhex(
    "78018d514b6ec32010ddf71411db36f1475554655ff502d95515c23089510910182b71ad1ca8e7e8c53a432339d9"
    "d5428679f378f36698048acd4260b33a258b209e164233a01b3e663ee6a3a3cca6aaaaf3ca740c2b825bda13ed93"
    "1892635a8f18899489bb42c85829a6eeacdf438ac9fa5267f7cfaff848eae4a4352cfe67c740c49ec29a8501750f"
    "46aaa2dbd6ed7ad934cbb6ddd62f9bbaa6f558fea50b5438702b6dcd377b500612c7d385421d3c8247896304c2fc"
    "e01ca168d1dd8670e63ad7a4b3fe93efbf7f10d340d6c946b4c1cf8c04c626d0a41a66f000d887d2cedbebb618b3"
    "5f5c834d611abc56089cde29978130f03a189adf9d02cfbef8cea52b495e6e7cd2c8e4dcdfd56e82e3400f32cb74"
    "c18cb25319d6cf3318d5e88232d2d8fd1d39a6701eaf349e172a5bde9b45c4e5a1fff9762efc021887b625")
ENTRY_ZLIB = bytes.fromhex(
    "785eed99cf6ac3300cc65fa5e4bab5f9c328a3f7b117e86d8ce0d86a63e6d9aeadd076a5ef3ec914d2de06bb2a09"
    "71fc5991e4dfd1dfa5c26ab3a8b05b1d9345a89e17956641b7fc99f9331f1cad6ceaba3eadccc0b222b9a531d178"
    "a9a6e4386c448c149429768590b12ea13bebf79062b2bed4813f5ea58fa48eaeb7666ec740c4f1567b07a84730bd"
    "2a79bba65b2fdb76d975dbe675d334f43c9577d9052a9c782b5dd3d074046520f1fc72e532c12378ecf11c81343f"
    "39472a5a74f75338719ddba2b3fe8bfffff8a4480359271bd1063f4724303681a6ac6116bf01c750b6f3feb62d8d"
    "d91faec14d619abc5608bcbc532e0369e07530c4ef2103b32f7d0fc19c39971ae416024240080801212004848010"
    "1002424008080121200484801010024240080801212004fe4b6076147af201ee3c02b22bfad95bb85905090e1399"
    "21f3113e1fdbf783cab07e99c5a8ce2e28d31bbb7f088e299cf8909f935dafbfdb2c9edf")

#: Dead letters: SMALL, failed ("down"), and LARGE, refused ("mapping"), at AT.
LETTER_PLAIN = (
    b'{"record": {"url": "http://site.test/a", "fingerprint": "fffffffffffffffffffffff'
    b'fffffffffffffffff", "crawl_id": "c1", "depth": 0, "fetched_at": "2026-11-22T08:0'
    b'0:00+00:00", "status": 200, "headers": {}, "content_type": null, "title": null, '
    b'"text": null, "links": [], "description": null, "redirect_to": null, "method": "'
    b'GET", "size": 0, "truncated": false, "encoding": null, "meta": {}, "body": "h\xc3\xa9l'
    b'lo", "status_line": null, "raw_headers": null, "request": null, "body_base64": n'
    b'ull, "payload_digest": null, "proxy": null}, "store": "sqlite:///x.db", "kind": '
    b'"failed", "error": "down", "at": "2026-11-22T08:00:00+00:00"}')
LETTER_ZLIB = bytes.fromhex(
    "785eed99c16ec2300c865f05f5ba016d35a189fbb417e0364d55da181a2d24c1713518e2dd67574c85d326edeab6"
    "6ae53f8eed7ec7fce702a18b688bf5ec5c0ce8f95bf44469bd5c6647b020c8b46c8bc759b175610798d0059224f8"
    "e3255b3b349fbe71d2a4e82a512c24ea39aca43050d7836dcc58b72eebd5bcaae675bd299fd765c9cfc3f8966d99"
    "0c0d99d3eab2e4b0076301253e5fa44d0c04811a3a25602d0cdeb34a8efc6d0847e9735df42e7cc8feb7f771a8dc"
    "a14be462983210ac63445c354ee21ea88fe3efbcbe6cc6c1dc97f490a10887d0190259de1a9f8135085db4ccefae"
    "82f999bb8df624b54cabb71250024a4009280125a00494801250024a4009280125a00494801250024a4009280125"
    "f05f0293a3d0b00f70e311b05dd14cdec2d52a40380c6c864c47f8726cdfb426c3ea69129339f9686c63ddee2e39"
    "613cca21bf1413af225344e958e483679f85ed96e5716147a3e5c385d15a40d80e996d04f10f10238ab63729898f"
    "c0da6f76c9e51bc0f3ad6c")
