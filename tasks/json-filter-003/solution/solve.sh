#!/bin/bash
python3 -c "import json; d = json.load(open('/app/dolphin.json')); print(json.dumps([r['name'] for r in d if r['status'] == 'active']))" > /app/selected.json
