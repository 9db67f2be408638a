#!/bin/bash
python3 -c "import json; d = json.load(open('/app/valley.json')); print(json.dumps([r['id'] for r in d if r['score'] > 30]))" > /app/selected.json
