#!/usr/bin/env python3
"""consume.py: read a Kafka topic from its start with isolation.level
read_committed and print each record as one JSON line, its value decoded
with Confluent's own AvroDeserializer, ProtobufDeserializer or
JSONDeserializer (the writer's schema from the registry):

  {"key": "k", "partition": 0, "offset": 3, "value": {...},
   "headers": {"processor.source.topic": "in", ...}}

With --strategy record or topic_record, "type" is the writer's record
name and "subject" the subject the deserializer's strategy derives from
it (Confluent's own functions); "schema_id" is the id of the record's
header. key is the key as a string (null without one); headers holds the
processor's lineage headers (processor.source, or the legacy
processor.source.topic, .partition, .offset) and is present only when the
record has one of them.

  consume.py --brokers 127.0.0.1:19092 --registry URL --topic T \\
      --format protobuf --schema-file order.proto --count N [--timeout S]

It stops after N records, or at the timeout; it exits 1 when fewer than
N arrived by then (after printing those). Avro needs no schema file (the
writer's schema comes from the registry); Protobuf needs the .proto file
for the message classes to decode into (--message: one or more,
comma-separated).
"""

import base64
import json
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.serialization import MessageField, SerializationContext

import common

LINEAGE = ("processor.source", "processor.source.topic", "processor.source.partition", "processor.source.offset")


def deserializer(args):
    """A function of (value bytes, topic) to its JSON form and what the
    deserializer's --strategy derived for it: {"type": the writer's record
    name, "subject": its subject}, empty under the topic strategy (which
    does not ask for the record name). Protobuf decodes into the class of
    the writer's message among those of --message (comma-separated full
    names; the file's first message when unset)."""
    client = common.registry(args)
    strategy = common.STRATEGIES[args.strategy]
    seen = {}

    def noting(ctx, record_name):
        subject = strategy(ctx, record_name)
        if record_name is not None:
            seen.update(type=record_name, subject=subject)
        return subject

    conf = {"subject.name.strategy": noting}
    if args.format == "avro":
        from confluent_kafka.schema_registry.avro import AvroDeserializer

        de = AvroDeserializer(client, conf=conf)

        def from_avro(b, topic):
            seen.clear()
            v = de(b, SerializationContext(topic, MessageField.VALUE))
            return v, dict(seen)

        return from_avro
    if args.format == "json_schema":
        from confluent_kafka.schema_registry.json_schema import JSONDeserializer

        jde = JSONDeserializer(None, schema_registry_client=client, conf=conf)

        def from_json(b, topic):
            seen.clear()
            v = jde(b, SerializationContext(topic, MessageField.VALUE))
            return v, dict(seen)

        return from_json
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import SerializationError
    from google.protobuf import json_format

    des = {}
    for name in (args.message.split(",") if args.message else [None]):
        cls = common.protobuf_class(args.schema_file, name)
        des[cls.DESCRIPTOR.full_name] = ProtobufDeserializer(cls, {"use.deprecated.format": False, **conf}, client)
    first = next(iter(des.values()))

    def from_protobuf(b, topic):
        ctx = SerializationContext(topic, MessageField.VALUE)
        seen.clear()
        try:
            msg = first(b, ctx)
        except SerializationError:
            msg = None  # another type: the strategy has seen which
        de = des.get(seen.get("type"), first)
        if de is not first or msg is None:
            seen.clear()
            msg = de(b, ctx)
        return json_format.MessageToDict(msg, preserving_proto_field_name=True), dict(seen)

    return from_protobuf


def plain(v):
    """JSON for what json cannot encode itself (Avro bytes, decimals, dates)."""
    if isinstance(v, bytes):
        return base64.standard_b64encode(v).decode("ascii")
    return str(v)


def main():
    args = common.parser(__doc__.splitlines()[0]).parse_args()
    if args.count is None or args.count < 0:
        common.fail("--count N is required")
    from_bytes = deserializer(args)
    consumer = Consumer({
        "bootstrap.servers": args.brokers,
        "group.id": f"interop-consume-{uuid.uuid4()}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
    })
    consumer.subscribe([args.topic])
    seen, deadline = 0, time.monotonic() + args.timeout
    try:
        while seen < args.count and time.monotonic() < deadline:
            msg = consumer.poll(min(1.0, max(0.0, deadline - time.monotonic())))
            if msg is None:
                continue
            if msg.error():
                if msg.error().retriable() or not msg.error().fatal():
                    continue
                raise KafkaException(msg.error())
            out = {
                "key": None if msg.key() is None else msg.key().decode("utf-8"),
                "partition": msg.partition(),
                "offset": msg.offset(),
                "value": None,
            }
            if msg.value() is not None:
                out["value"], named = from_bytes(msg.value(), msg.topic())
                out.update(named)
                if len(msg.value()) >= 5:
                    out["schema_id"] = int.from_bytes(msg.value()[1:5], "big")
            headers = {k: v.decode("utf-8") for k, v in (msg.headers() or []) if k in LINEAGE and v is not None}
            if headers:
                out["headers"] = headers
            print(json.dumps(out, default=plain, sort_keys=True), flush=True)
            seen += 1
    except KafkaException as e:
        common.fail(f"reading {args.topic}: {e}")
    finally:
        consumer.close()
    if seen < args.count:
        common.fail(f"read {seen} records of {args.topic} within {args.timeout}s, want {args.count}")


if __name__ == "__main__":
    main()
