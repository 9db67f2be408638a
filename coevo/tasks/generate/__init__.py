"""The bundled task suite: procedurally generated Harbor task folders of everyday terminal work.

Data and tools live apart:

    families/           the data: each family's draw of one instance, the word lists, the held-out set
    suite.py            writes `per_family` instances of each family and manifest.json (the splits)
    writer.py           TaskSpec, and how one becomes a Harbor task folder, byte for byte
    checks.py           the verifier side: shared check sets and single families' helper definitions
    verifier_template.py  the standard-library verify.py every task gets, its checks appended
"""

from coevo.tasks.generate.families import FAMILIES, HELD_OUT
from coevo.tasks.generate.suite import MANIFEST, generate_suite, generated_manifest

__all__ = ["FAMILIES", "HELD_OUT", "MANIFEST", "generate_suite", "generated_manifest"]
