#!/bin/bash
python3 -c "import json; d = json.load(open('/app/walnut.json')); print(json.dumps([r['name'] for r in d if r['status'] == 'pending']))" > /app/selected.json
