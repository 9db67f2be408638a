#!/bin/bash
wc -l < /app/docs/amber_jungle.txt > /app/answer.txt
