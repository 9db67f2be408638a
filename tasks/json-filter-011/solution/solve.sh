#!/bin/bash
python3 -c "import json; d = json.load(open('/app/crater.json')); print(json.dumps([r['id'] for r in d if r['score'] > 50]))" > /app/selected.json
