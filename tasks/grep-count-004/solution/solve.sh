#!/bin/bash
grep -c 'ember' /app/logs/island.log > /app/count.txt
