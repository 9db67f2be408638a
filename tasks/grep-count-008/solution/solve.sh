#!/bin/bash
grep -c 'mesa' /app/logs/pebble.log > /app/tiger_count.txt
