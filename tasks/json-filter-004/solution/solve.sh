#!/bin/bash
python3 -c "import json; d = json.load(open('/app/bucket.json')); print(json.dumps([r['id'] for r in d if r['score'] > 40]))" > /app/selected.json
