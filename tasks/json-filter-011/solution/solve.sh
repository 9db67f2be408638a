#!/bin/bash
python3 -c "import json; d = json.load(open('/app/crater.json')); print(json.dumps([r['id'] for r in d if r['score'] > 65]))" > /app/desert_selected.json
