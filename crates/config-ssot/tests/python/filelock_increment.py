"""The desktop app's side of the settings file, as config-ssot's cross-language test drives it.

increment FILE KEY N: N read-modify-writes of an integer KEY under filelock.FileLock(FILE + ".lock"),
    rewriting the file in place with json.dump(indent=2), as a Python preferences UI would.
hold FILE: acquire the lock, print "locked", keep it until stdin closes.
"""
import json
import sys

from filelock import FileLock


def main() -> None:
    mode, path = sys.argv[1], sys.argv[2]
    lock = FileLock(path + ".lock")
    if mode == "increment":
        key, n = sys.argv[3], int(sys.argv[4])
        for _ in range(n):
            with lock:
                with open(path, encoding="utf-8") as f:
                    data = json.load(f)
                data[key] += 1
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(data, f, indent=2)
        print("done", flush=True)
    elif mode == "hold":
        with lock:
            print("locked", flush=True)
            sys.stdin.read()
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
