"""The summary of a tinygrad test run (tools/tinygrad_tests.sh): per file, passed out of every
collected test, the failures grouped by reason, the skipped tests and the tests left out.

usage: tinygrad_tests_summary.py RESULTS.xml LEFTOUT.txt TEST_FILE...
"""
import collections
import re
import sys
import xml.etree.ElementTree as ET


def reason(text):
  """A failure's message as a group key: its first line with numbers and addresses blanked."""
  line = next((l.strip() for l in (text or "").splitlines() if l.strip()), "(no message)")
  line = re.sub(r"0x[0-9a-f]+", "0x…", line)
  line = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", line)
  return line[:160]


def file_of(classname, files):
  """The test file a junit class name (`test.backend.test_ops.TestOps`) belongs to."""
  module = classname.rsplit(".", 1)[0].replace(".", "/") + ".py"
  return next((f for f in files if f.endswith(module) or module.endswith(f)), module)


def main(results, leftout_path, files):
  cases = collections.defaultdict(list)  # file -> [(name, outcome, reason)]
  for case in ET.parse(results).getroot().iter("testcase"):
    f = file_of(case.get("classname", ""), files)
    name = f"{case.get('classname').rsplit('.', 1)[-1]}.{case.get('name')}"
    outcome, why = "passed", ""
    for child in case:
      if child.tag in ("failure", "error"): outcome, why = "failed", reason(child.get("message") or child.text)
      elif child.tag == "skipped": outcome, why = "skipped", reason(child.get("message"))
    cases[f].append((name, outcome, why))
  leftout = collections.defaultdict(list)
  for line in open(leftout_path):
    node, _, why = line.partition("#")
    if node.strip(): leftout[node.split("::")[0].strip()].append((node.strip(), why.strip()))

  total_passed = total = 0
  print("# tinygrad's tests through lazygrad\n")
  for f in files:
    ran, out = cases.get(f, []), leftout.get(f, [])
    collected = len(ran) + len(out)
    passed = sum(1 for _, o, _ in ran if o == "passed")
    total_passed, total = total_passed + passed, total + collected
    pct = 100 * passed / collected if collected else 0.0
    print(f"## {f}: {passed}/{collected} passed ({pct:.1f}%)\n")
    failed = collections.Counter(why for _, o, why in ran if o == "failed")
    if failed:
      print(f"failed: {sum(failed.values())}, by reason:\n")
      for why, n in failed.most_common():
        names = [n_ for n_, o, w in ran if o == "failed" and w == why]
        print(f"- {n} × `{why}`: {', '.join(names[:6])}{' …' if len(names) > 6 else ''}")
      print()
    skipped = [(n, w) for n, o, w in ran if o == "skipped"]
    if skipped:
      print(f"skipped by the test file: {len(skipped)}\n")
      for n, w in skipped: print(f"- {n}: {w}")
      print()
    if out:
      print(f"left out: {len(out)}\n")
      for n, w in out: print(f"- {n.split('::', 1)[-1]}: {w}")
      print()
  if len(files) > 1 and total:
    print(f"## all: {total_passed}/{total} passed ({100 * total_passed / total:.1f}%)")


if __name__ == "__main__":
  main(sys.argv[1], sys.argv[2], sys.argv[3:])
