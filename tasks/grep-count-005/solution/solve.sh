#!/bin/bash
grep -c 'topaz' /app/logs/coral.log > /app/marble_count.txt
