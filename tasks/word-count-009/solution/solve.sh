#!/bin/bash
wc -w < /app/docs/brave_maple.txt > /app/answer.txt
