#!/bin/bash
python3 -c "import json; d = json.load(open('/app/fig.json')); print(json.dumps([r['id'] for r in d if r['score'] > 64]))" > /app/selected.json
