#!/bin/bash
python3 -c "import json; d = json.load(open('/app/owl.json')); print(json.dumps([r['id'] for r in d if r['score'] > 67]))" > /app/selected.json
