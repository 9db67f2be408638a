#!/bin/bash
grep -c 'hollow' /app/logs/cedar.log > /app/drum_count.txt
