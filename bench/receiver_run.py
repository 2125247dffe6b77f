"""A real OTLP receiver (tests/otlp_receiver.py) in its own process, for benchmarks whose CPU
must not include the receiving side. Prints its HTTP and gRPC endpoints as one JSON line,
then answers each line on stdin: ``count`` (spans received so far, less loss records),
``clear``, ``drain N`` (take at most N spans a second over HTTP from now on; 0: no limit),
``quit``."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from otlp_receiver import OTLPReceiver  # noqa: E402


def main():
    with OTLPReceiver() as receiver:
        print(json.dumps({"http": receiver.http_endpoint, "grpc": receiver.grpc_endpoint}), flush=True)
        for line in sys.stdin:
            command = line.strip()
            if command == "count":
                print(len(receiver.spans()), flush=True)
            elif command == "clear":
                receiver.clear()
                print("ok", flush=True)
            elif command.startswith("drain "):
                receiver.drain_spans_per_s = float(command.split()[1])
                print("ok", flush=True)
            elif command == "quit":
                return


if __name__ == "__main__":
    main()
