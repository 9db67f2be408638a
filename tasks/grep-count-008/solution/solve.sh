#!/bin/bash
grep -c 'mesa' /app/logs/pebble.log > /app/count.txt
