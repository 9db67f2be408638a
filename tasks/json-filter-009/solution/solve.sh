#!/bin/bash
python3 -c "import json; d = json.load(open('/app/planet.json')); print(json.dumps([r['id'] for r in d if r['score'] > 70]))" > /app/selected.json
