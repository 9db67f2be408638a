#!/bin/bash
python3 -c "import json; d = json.load(open('/app/marble.json')); print(json.dumps([r['id'] for r in d if r['score'] > 42]))" > /app/selected.json
