#!/bin/bash
grep -c 'ivory' /app/logs/island.log > /app/ember_count.txt
