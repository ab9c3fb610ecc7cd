"""Counts the test cases of JUnit XML files (ctest --output-junit, pytest --junitxml): prints one
line per file, `passed failed skipped`; a missing or unreadable file counts as none. run.sh and
tests/compat/triton_compat.sh print their summary lines from it."""

import sys
import xml.etree.ElementTree as ET


def counts(path):
    passed = failed = skipped = 0
    try:
        cases = list(ET.parse(path).getroot().iter("testcase"))
    except (OSError, ET.ParseError):
        cases = []
    for case in cases:
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None or case.get("status") == "notrun":
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(*counts(path))
